# InstallUnits.cmake - run by `cmake --install`: copies deploy/systemd/*.service
# into the unit directory with /usr/local/bin and /usr/local/share/doc/outbox
# replaced by this install's bin and doc directories, so that ExecStart=
# names the installed program whatever --prefix was given. The variables
# OUTBOX_UNIT_* / OUTBOX_*DIR come from the install(CODE) in CMakeLists.txt.
foreach(d UNITDIR BINDIR DOCDIR)
  if(IS_ABSOLUTE "${OUTBOX_${d}}")
    set(full_${d} "${OUTBOX_${d}}")
  else()
    set(full_${d} "${CMAKE_INSTALL_PREFIX}/${OUTBOX_${d}}")
  endif()
endforeach()
file(GLOB units "${OUTBOX_UNIT_SOURCES}/*.service")
file(MAKE_DIRECTORY "${OUTBOX_UNIT_STAGE}")
foreach(unit ${units})
  get_filename_component(name "${unit}" NAME)
  file(READ "${unit}" text)
  string(REPLACE "/usr/local/bin/" "${full_BINDIR}/" text "${text}")
  string(REPLACE "/usr/local/share/doc/outbox/" "${full_DOCDIR}/" text "${text}")
  file(WRITE "${OUTBOX_UNIT_STAGE}/${name}" "${text}")
  file(INSTALL "${OUTBOX_UNIT_STAGE}/${name}" DESTINATION "${full_UNITDIR}")
endforeach()
