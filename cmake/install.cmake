# Installed layout (DESIGN.md, "Installed layout") and the Debian package. With the prefix /usr:
# /usr/bin/sdcprobe, /usr/lib/<triplet>/libsdcprobe.so.1, /usr/include/sdcprobe/sdcprobe.h,
# /usr/lib/sdcprobe/ (gate scripts), /etc/default/sdcprobe, /var/lib/sdcprobe/, the systemd units,
# /usr/share/doc/sdcprobe/, /usr/share/man/man1/sdcprobe*.1.gz and the Python package.
# The system layout is the default (override with -DCMAKE_INSTALL_PREFIX or cmake --install --prefix).
if(CMAKE_INSTALL_PREFIX_INITIALIZED_TO_DEFAULT)
  set(CMAKE_INSTALL_PREFIX /usr CACHE PATH "Install prefix" FORCE)
endif()
include(GNUInstallDirs)

# No RUNPATH: Debian's libraries are on the loader's path, and the CUDA libraries are found through
# the ld.so.conf.d entries that NVIDIA's packages install (the package depends on them, below).

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
install(FILES deploy/kubernetes/sdcprobe.yaml deploy/kubernetes/npd-sdcprobe-plugin.json deploy/kubernetes/Dockerfile
        DESTINATION ${CMAKE_INSTALL_DOCDIR}/examples/kubernetes)
file(GLOB sdc_docs docs/*.md)
install(FILES README.md ${sdc_docs} DESTINATION ${CMAKE_INSTALL_DOCDIR})

# A man page per command (cmake/man_pages.sh: help2man over each --help).
find_program(SDC_HELP2MAN help2man)
if(SDC_HELP2MAN)
  set(sdc_man_dir ${PROJECT_BINARY_DIR}/man)
  add_custom_command(
    OUTPUT ${sdc_man_dir}/sdcprobe.1.gz
    COMMAND ${PROJECT_SOURCE_DIR}/cmake/man_pages.sh ${SDC_HELP2MAN} $<TARGET_FILE:sdcprobe> ${sdc_man_dir}
    DEPENDS sdcprobe ${PROJECT_SOURCE_DIR}/cmake/man_pages.sh
    COMMENT "Man pages sdcprobe.1, sdcprobe-*.1 (help2man)")
  add_custom_target(sdcprobe_man ALL DEPENDS ${sdc_man_dir}/sdcprobe.1.gz)
  install(DIRECTORY ${sdc_man_dir}/ DESTINATION ${CMAKE_INSTALL_MANDIR}/man1 FILES_MATCHING PATTERN "*.1.gz")
else()
  message(STATUS "help2man not found: no man pages (scripts/install-deps.sh installs it)")
endif()

# The package's copyright and changelog (Debian's names and places; the changelog gzipped).
file(STRINGS deploy/debian/changelog sdc_changelog_head LIMIT_COUNT 1)
if(NOT sdc_changelog_head MATCHES "^sdcprobe \\(${PROJECT_VERSION}\\)")
  message(FATAL_ERROR "deploy/debian/changelog: the first entry is not version ${PROJECT_VERSION}")
endif()
set(sdc_changelog ${PROJECT_BINARY_DIR}/changelog.gz)
add_custom_command(
  OUTPUT ${sdc_changelog}
  COMMAND gzip -9nc ${PROJECT_SOURCE_DIR}/deploy/debian/changelog > ${sdc_changelog}
  DEPENDS ${PROJECT_SOURCE_DIR}/deploy/debian/changelog)
add_custom_target(sdcprobe_changelog ALL DEPENDS ${sdc_changelog})
install(FILES ${sdc_changelog} deploy/debian/copyright DESTINATION ${CMAKE_INSTALL_DOCDIR})

# cpack -G DEB (from the build directory): one package, dependencies from dpkg-shlibdeps.
set(CPACK_PACKAGE_NAME sdcprobe)
set(CPACK_PACKAGE_VENDOR sdcprobe)
set(CPACK_PACKAGE_CONTACT "sdcprobe developers <dev@sdcprobe.invalid>")
set(CPACK_DEBIAN_PACKAGE_DESCRIPTION "find GPUs and CPUs that compute wrong answers silently
sdcprobe tests devices for silent data corruption: arithmetic, memory, matrix
multiplication and collectives that return wrong results without an error.
Every probe has an independent expected answer, so a device that is wrong the
same way every time is caught too.
.
It gates nodes before jobs (qualify, with Slurm, NHC and node-problem-detector
hooks), sweeps idle nodes on a timer with a history, a quarantine and
Prometheus metrics, and offers a library and Python package for checks inside
a training job. Built with CUDA, it tests NVIDIA GPUs; otherwise the CPU.")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_GENERATOR DEB)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION admin)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_STRIP_FILES ON)
# The CUDA runtime, cuBLAS(Lt) and NCCL of the toolkit built with, by the names of NVIDIA's
# repository (docs/operating.md, "Installing"). dpkg-shlibdeps has no information on them: it finds
# them here and leaves them to these dependencies.
if(SDC_HAVE_CUDA)
  set(sdc_cuda_suffix ${CUDAToolkit_VERSION_MAJOR}-${CUDAToolkit_VERSION_MINOR})
  set(CPACK_DEBIAN_PACKAGE_DEPENDS "cuda-cudart-${sdc_cuda_suffix}, libcublas-${sdc_cuda_suffix}")
  if(SDC_HAVE_NCCL)
    string(APPEND CPACK_DEBIAN_PACKAGE_DEPENDS ", libnccl2")
  endif()
  set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS ${CUDAToolkit_LIBRARY_DIR} ${CUDAToolkit_LIBRARY_ROOT}/lib)
endif()
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS python3)
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "slurm-client, prometheus-node-exporter, nhc")
# Control files: the conffile; libsdcprobe.so.1's shlibs and ldconfig trigger (cmake/deb_fixup.sh
# drops the postinst CPack adds to call ldconfig); purge removing /var/lib/sdcprobe.
set(sdc_control ${PROJECT_BINARY_DIR}/cpack)
file(WRITE ${sdc_control}/conffiles "/etc/default/sdcprobe\n")
file(WRITE ${sdc_control}/shlibs "libsdcprobe 1 sdcprobe (>= ${PROJECT_VERSION})\n")
file(WRITE ${sdc_control}/triggers "activate-noawait ldconfig\n")
file(COPY deploy/debian/postrm deploy/debian/prerm DESTINATION ${sdc_control})
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA ${sdc_control}/conffiles ${sdc_control}/shlibs ${sdc_control}/triggers
                                       ${sdc_control}/postrm ${sdc_control}/prerm)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
set(CPACK_POST_BUILD_SCRIPTS ${PROJECT_SOURCE_DIR}/cmake/deb_post_build.cmake)
include(CPack)
