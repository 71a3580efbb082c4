/*
 * version.h - the release of this build, OB_VERSION ("0.1.0"): every
 * program's --version, the outbox_build_info metric. It comes from
 * project(VERSION) in CMakeLists.txt, defined for every compile as
 * OB_RELEASE (a bare number: a string's quotes do not survive every
 * command line that passes it), and is made a string here.
 */
#ifndef OUTBOX_VERSION_H
#define OUTBOX_VERSION_H

#ifndef OB_RELEASE
#error "OB_RELEASE is not defined: build with CMake (CMakeLists.txt defines it)"
#endif

#define OB_VERSION_STRING_(x) #x
#define OB_VERSION_STRING(x) OB_VERSION_STRING_(x)
#define OB_VERSION OB_VERSION_STRING(OB_RELEASE)

#endif
