# Run after a test executable is built (cmake -P): writes OUT, the ctest script giving each Catch2
# test of EXE (of the target TARGET) tagged with one of TAGS (comma-separated) the labels
# "slow" and those tags, besides LABELS (comma-separated, the executable's own). `ctest -LE slow`
# is then the fast loop: no nvcc compile, no example build, no server started. (Catch2 2.x's CMake
# module has no tags-as-labels.)
string(REPLACE "," ";" tags "${TAGS}")
string(REPLACE "," ";" base "${LABELS}")
set(names)
foreach(tag IN LISTS tags)
  execute_process(COMMAND "${EXE}" "[${tag}]" --list-test-names-only
                  OUTPUT_VARIABLE out RESULT_VARIABLE rc)
  if(rc LESS 0)
    message(FATAL_ERROR "${EXE} [${tag}] --list-test-names-only: ${rc}\n${out}")
  endif()
  string(REPLACE "\n" ";" lines "${out}")
  foreach(name IN LISTS lines)
    if(name STREQUAL "")
      continue()
    endif()
    string(MD5 id "${name}")
    if(NOT DEFINED labels_${id})
      list(APPEND names "${name}")
      set(labels_${id} ${base} slow)
    endif()
    list(APPEND labels_${id} ${tag})
  endforeach()
endforeach()
# By Catch2's own list of the executable's tests (${TARGET}_TESTS, "TARGET:" and maybe a space,
# then the test's name), so the names are exactly the ones it gave ctest.
set(script "foreach(_archbuild_t IN LISTS ${TARGET}_TESTS)\n")
string(APPEND script "  string(REGEX REPLACE \"^${TARGET}: ?\" \"\" _archbuild_n \"\${_archbuild_t}\")\n")
set(keyword "if")
foreach(name IN LISTS names)
  string(MD5 id "${name}")
  string(APPEND script "  ${keyword}(_archbuild_n STREQUAL [==[${name}]==])\n"
                       "    set_tests_properties(\"\${_archbuild_t}\" PROPERTIES LABELS \"${labels_${id}}\")\n")
  set(keyword "elseif")
endforeach()
if(names)
  string(APPEND script "  endif()\n")
endif()
string(APPEND script "endforeach()\n")
file(WRITE "${OUT}" "${script}")
