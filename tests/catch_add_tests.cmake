# Test discovery for catch_discover_tests() (tests/CMakeLists.txt), in place
# of Catch2 2.13's CatchAddTests.cmake, which cuts a test name at each ';'
# ("...broken JSON; exact times; ..." became four tests) and passes a name
# that starts with '-' ("--explain ...") where Catch2 reads it as an option.
# Run at build time with the -D variables catch_discover_tests() passes; writes
# one add_test() per test case (spec: the name, escaped) to CTEST_FILE.
execute_process(
  COMMAND ${TEST_EXECUTOR} "${TEST_EXECUTABLE}" ${TEST_SPEC} --list-test-names-only
  OUTPUT_VARIABLE output
  RESULT_VARIABLE result
  WORKING_DIRECTORY "${TEST_WORKING_DIR}")
# Catch2 exits with the number of tests listed.
if(NOT result MATCHES "^[0-9]+$")
  message(FATAL_ERROR "${TEST_EXECUTABLE} ${TEST_SPEC} --list-test-names-only: ${result}\n${output}")
endif()

# Bracket arguments: names are written as they are.
function(bracket value out)
  set(${out} "[==[${value}]==]" PARENT_SCOPE)
endfunction()

set(script "")
set(tests "")
string(REPLACE ";" "<semicolon>" output "${output}")
string(REPLACE "\n" ";" lines "${output}")
bracket("${TEST_WORKING_DIR}" dir)
set(props "")
foreach(p IN LISTS TEST_PROPERTIES)
  bracket("${p}" b)
  string(APPEND props " ${b}")
endforeach()
set(args "")
foreach(a IN LISTS TEST_EXTRA_ARGS)
  bracket("${a}" b)
  string(APPEND args " ${b}")
endforeach()
foreach(line IN LISTS lines)
  if(line STREQUAL "")
    continue()
  endif()
  string(REPLACE "<semicolon>" ";" name "${line}")
  # Catch2's test spec: \ , [ ] are escaped; a leading - or ~ too.
  set(spec "${name}")
  foreach(c "\\" "," "[" "]")
    string(REPLACE "${c}" "\\${c}" spec "${spec}")
  endforeach()
  string(SUBSTRING "${spec}" 0 1 first)
  if(first STREQUAL "-" OR first STREQUAL "~")
    string(PREPEND spec "\\")
  endif()
  bracket("${TEST_PREFIX}${name}${TEST_SUFFIX}" ctest_name)
  bracket("${spec}" spec)
  bracket("${TEST_EXECUTABLE}" exe)
  string(APPEND script "add_test(${ctest_name} ${TEST_EXECUTOR} ${exe} ${spec}${args})\n")
  string(APPEND script "set_tests_properties(${ctest_name} PROPERTIES WORKING_DIRECTORY ${dir}${props})\n")
  list(APPEND tests "${TEST_PREFIX}${line}${TEST_SUFFIX}")
endforeach()
string(APPEND script "set(${TEST_LIST} [==[${tests}]==])\n")
file(WRITE "${CTEST_FILE}" "${script}")
