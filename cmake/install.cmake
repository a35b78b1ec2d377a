# Installed layout (DESIGN.md, "Installed layout") and the Debian package. With the prefix /usr:
# /usr/bin/sdcprobe, /usr/lib/<triplet>/libsdcprobe.so.1, /usr/include/sdcprobe/sdcprobe.h,
# /usr/lib/sdcprobe/ (gate scripts), /etc/default/sdcprobe, /var/lib/sdcprobe/, the systemd units,
# /usr/share/doc/sdcprobe/, /usr/share/man/man1/sdcprobe.1.gz and the Python package.
# The system layout is the default (override with -DCMAKE_INSTALL_PREFIX or cmake --install --prefix).
if(CMAKE_INSTALL_PREFIX_INITIALIZED_TO_DEFAULT)
  set(CMAKE_INSTALL_PREFIX /usr CACHE PATH "Install prefix" FORCE)
endif()
include(GNUInstallDirs)

# Libraries found outside the build tree (the CUDA toolkit's, OpenMPI's) stay on the installed
# binary's RUNPATH; nothing of the build tree does.
set_target_properties(sdcprobe sdcprobe_inline PROPERTIES INSTALL_RPATH_USE_LINK_PATH ON)

install(TARGETS sdcprobe RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(TARGETS sdcprobe_inline LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(FILES host/include/sdcprobe/sdcprobe.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/sdcprobe)
# Debian's python3 searches /usr/lib/python3/dist-packages (and /usr/local/lib/python3/dist-packages).
install(DIRECTORY python/sdcprobe DESTINATION lib/python3/dist-packages FILES_MATCHING PATTERN "*.py")

set(SDC_GATE_DIR lib/sdcprobe)
install(PROGRAMS deploy/slurm/healthcheck.sh deploy/slurm/prolog.sh deploy/slurm/idle-check.sh
        DESTINATION ${SDC_GATE_DIR})
install(FILES deploy/slurm/sdcprobe-gate.sh deploy/nhc/sdcprobe.nhc DESTINATION ${SDC_GATE_DIR})
install(FILES deploy/default/sdcprobe DESTINATION ${CMAKE_INSTALL_FULL_SYSCONFDIR}/default)
install(DIRECTORY DESTINATION ${CMAKE_INSTALL_FULL_LOCALSTATEDIR}/lib/sdcprobe)
install(FILES deploy/systemd/sdcprobe-sweep.service deploy/systemd/sdcprobe-sweep.timer
        DESTINATION lib/systemd/system)
install(FILES deploy/kubernetes/sdcprobe.yaml deploy/kubernetes/npd-sdcprobe-plugin.json
        DESTINATION ${CMAKE_INSTALL_DOCDIR}/examples/kubernetes)
file(GLOB sdc_docs docs/*.md)
install(FILES README.md ${sdc_docs} DESTINATION ${CMAKE_INSTALL_DOCDIR})

# The man page, from the built binary's --help and --version.
find_program(SDC_HELP2MAN help2man)
if(SDC_HELP2MAN)
  set(sdc_man ${PROJECT_BINARY_DIR}/sdcprobe.1.gz)
  add_custom_command(
    OUTPUT ${sdc_man}
    COMMAND ${SDC_HELP2MAN} --no-info --section 1 --source "sdcprobe ${PROJECT_VERSION}"
            --name "find GPUs and CPUs that compute wrong answers" --output ${PROJECT_BINARY_DIR}/sdcprobe.1
            $<TARGET_FILE:sdcprobe>
    COMMAND gzip -9nf ${PROJECT_BINARY_DIR}/sdcprobe.1
    DEPENDS sdcprobe
    COMMENT "Man page sdcprobe.1 (help2man)")
  add_custom_target(sdcprobe_man ALL DEPENDS ${sdc_man})
  install(FILES ${sdc_man} DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)
else()
  message(STATUS "help2man not found: no man page (scripts/install-deps.sh installs it)")
endif()

# cpack -G DEB (from the build directory): one package, dependencies from dpkg-shlibdeps.
set(CPACK_PACKAGE_NAME sdcprobe)
set(CPACK_PACKAGE_VENDOR sdcprobe)
set(CPACK_PACKAGE_CONTACT "sdcprobe maintainers <root@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "finds GPUs and CPUs that compute wrong answers without reporting an error")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_GENERATOR DEB)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION admin)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)  # shlibs for libsdcprobe.so.1, and the ldconfig trigger
# Libraries no Debian package provides (the CUDA toolkit's in /usr/local/cuda) have no dependency
# information: dpkg-shlibdeps looks them up here instead of failing.
if(SDC_HAVE_CUDA)
  set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS ${CUDAToolkit_LIBRARY_DIR} ${CUDAToolkit_LIBRARY_ROOT}/lib)
endif()
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "python3, bsdutils")
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "slurm-client, prometheus-node-exporter, nhc")
set(sdc_conffiles ${PROJECT_BINARY_DIR}/cpack/conffiles)
file(WRITE ${sdc_conffiles} "/etc/default/sdcprobe\n")
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA ${sdc_conffiles})
include(CPack)
