# Each C library's header and binary must come from the same installation.
# With two versions installed (a Debian package and a copy under
# /usr/local, say), find_path and find_library can pick one each; the build
# then succeeds and every call fails at run time (libjpeg: "Wrong JPEG
# library version: library is 62, caller expects 80"). Each check builds and
# runs a small program against the pair found and stops the configure step
# with one line naming both paths when they disagree.

set(LINGBOT_PAIR_CHECKS_DIR ${CMAKE_CURRENT_LIST_DIR}/pair_checks)

function(lingbot_check_library_pair name source)
  cmake_parse_arguments(arg "" "" "INCLUDES;LIBRARIES" ${ARGN})
  try_run(run_result compile_ok
    ${CMAKE_BINARY_DIR}/pair_checks/${name} ${LINGBOT_PAIR_CHECKS_DIR}/${source}
    CMAKE_FLAGS "-DINCLUDE_DIRECTORIES=${arg_INCLUDES}"
    LINK_LIBRARIES ${arg_LIBRARIES}
    COMPILE_OUTPUT_VARIABLE compile_log
    RUN_OUTPUT_VARIABLE run_log)
  string(STRIP "${run_log}" run_log)
  if(NOT compile_ok)
    message(FATAL_ERROR "${name}: cannot build a program with header ${arg_INCLUDES} and library "
                        "${arg_LIBRARIES}:\n${compile_log}")
  endif()
  if(NOT run_result EQUAL 0)
    message(FATAL_ERROR "${name}: the header in ${arg_INCLUDES} and the library ${arg_LIBRARIES} come from "
                        "different installations (${run_log}); remove one, or point CMAKE_PREFIX_PATH at one")
  endif()
  message(STATUS "${name}: ${run_log} (${arg_LIBRARIES})")
endfunction()

# libjpeg-turbo keeps jconfig.h (which fixes the ABI version) in the
# multiarch include folder, and FindJPEG looks for jpeglib.h only: another
# installation's jconfig.h further along the compiler's search path (a
# system folder, CPATH) can then stand in for this one's. Take it from the
# library's own prefix, ahead of the rest.
macro(lingbot_jpeg_config_beside_library)
  list(GET JPEG_LIBRARIES 0 jpeg_lib)
  get_filename_component(jpeg_prefix "${jpeg_lib}" DIRECTORY)
  string(REGEX REPLACE "/lib(/${CMAKE_LIBRARY_ARCHITECTURE})?$" "" jpeg_prefix "${jpeg_prefix}")
  find_path(JPEG_CONFIG_INCLUDE jconfig.h
            PATHS ${jpeg_prefix}/include/${CMAKE_LIBRARY_ARCHITECTURE} ${jpeg_prefix}/include NO_DEFAULT_PATH)
  if(JPEG_CONFIG_INCLUDE)
    list(PREPEND JPEG_INCLUDE_DIRS ${JPEG_CONFIG_INCLUDE})
    list(REMOVE_DUPLICATES JPEG_INCLUDE_DIRS)
    set_property(TARGET JPEG::JPEG PROPERTY INTERFACE_INCLUDE_DIRECTORIES ${JPEG_INCLUDE_DIRS})
  endif()
endmacro()
