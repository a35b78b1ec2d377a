# CPACK_POST_BUILD_SCRIPTS: cmake/deb_fixup.sh on every package CPack made.
foreach(deb IN LISTS CPACK_PACKAGE_FILES)
  execute_process(COMMAND ${CMAKE_CURRENT_LIST_DIR}/deb_fixup.sh ${deb} RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "cmake/deb_fixup.sh ${deb} failed (${rc})")
  endif()
endforeach()
