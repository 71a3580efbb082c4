#!/usr/bin/env bash
# program_includes_negative.sh - scripts/check-program-includes.sh must go
# red on a program including another's header before its green on the
# real tree means anything: copy the sources into a scratch tree, break
# one rule at a time, expect the check to fail saying so.
set -uo pipefail
check=$(cd "$(dirname "$0")/../.." && pwd)/scripts/check-program-includes.sh
copy="common client producer relay consumer ctl tools"
. "$(dirname "$0")/negative_lib.sh"
negative_start

# the relay reaching into the consumer
fresh; sed -i '0,/#include "outbox\/sqlstate.h"/s//#include "outbox\/sqlstate.h"\n#include "inbox.h"/' "$scratch/t/relay/claim.c"
expect "relay includes a consumer header" 'relay/claim.c includes "inbox.h", a header of another program'

# outboxctl's include path into the relay again
fresh; sed -i 's#target_include_directories(outboxctl PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})#target_include_directories(outboxctl PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}\n  ${CMAKE_SOURCE_DIR}/relay)#' "$scratch/t/ctl/CMakeLists.txt"
expect "ctl adds relay/ to its include path" "ctl/CMakeLists.txt adds relay/ to its include path"

# the web demo reaching into the producer again
fresh; sed -i 's/#include "outbox\/proc.h"/#include "outbox\/proc.h"\n#include "api.h"/' "$scratch/t/ctl/web_demo_steps.c"
expect "ctl includes a producer header" 'ctl/web_demo_steps.c includes "api.h", a header of another program'

negative_end program_includes_negative
