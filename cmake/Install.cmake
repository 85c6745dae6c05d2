# Installation: the library (exported as convtune::convtune) and the seed networks' trainer on top of it
# (libconvtune_nn, exported as convtune::nn), the public headers, the command line (finding both libraries beside
# it through its RUNPATH), the shipped tuning data and suites (share/convtune, found relative to the library at run
# time), a CMake package, pkg-config files (convtune, convtune-nn), and CPack's Debian package.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(CONVTUNE_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/convtune)
set(CONVTUNE_BACKENDS "cpu")
if(CONVTUNE_WITH_OPENCL)
  string(APPEND CONVTUNE_BACKENDS ";opencl")
endif()
if(CONVTUNE_WITH_CUDA)
  string(APPEND CONVTUNE_BACKENDS ";cuda")
endif()

install(TARGETS convtune convtune_nn EXPORT convtuneTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT runtime NAMELINK_COMPONENT development
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/convtune DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT development)
file(RELATIVE_PATH _lib_from_bin ${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_BINDIR} ${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_LIBDIR})
set_target_properties(convtune_cli PROPERTIES INSTALL_RPATH "$ORIGIN/${_lib_from_bin}")
install(TARGETS convtune_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT runtime)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/tuning/ DESTINATION ${CONVTUNE_INSTALL_DATADIR}/tuning COMPONENT runtime
  FILES_MATCHING PATTERN "*.json")
install(DIRECTORY ${PROJECT_SOURCE_DIR}/bench/suites/ DESTINATION ${CONVTUNE_INSTALL_DATADIR}/suites COMPONENT runtime
  FILES_MATCHING PATTERN "*.txt")

install(EXPORT convtuneTargets NAMESPACE convtune:: DESTINATION ${CONVTUNE_CMAKE_DIR} COMPONENT development)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/convtuneConfig.cmake.in
  ${PROJECT_BINARY_DIR}/convtuneConfig.cmake INSTALL_DESTINATION ${CONVTUNE_CMAKE_DIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/convtuneConfigVersion.cmake COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/convtuneConfig.cmake ${PROJECT_BINARY_DIR}/convtuneConfigVersion.cmake
  DESTINATION ${CONVTUNE_CMAKE_DIR} COMPONENT development)
file(RELATIVE_PATH CONVTUNE_PREFIX_FROM_PC ${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_LIBDIR}/pkgconfig ${CMAKE_INSTALL_PREFIX})
configure_file(${PROJECT_SOURCE_DIR}/cmake/convtune.pc.in ${PROJECT_BINARY_DIR}/convtune.pc @ONLY)
configure_file(${PROJECT_SOURCE_DIR}/cmake/convtune-nn.pc.in ${PROJECT_BINARY_DIR}/convtune-nn.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/convtune.pc ${PROJECT_BINARY_DIR}/convtune-nn.pc
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig COMPONENT development)

# cpack -G DEB in the build folder: one package with both libraries, headers, command line and data.
set(CPACK_PACKAGE_NAME convtune)
set(CPACK_PACKAGE_VENDOR "convtune developers")
set(CPACK_PACKAGE_CONTACT "convtune developers <convtune@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "Tuned convolution and GEMM kernels for any GPU or CPU")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_GENERATOR DEB)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION science)
# Found by dpkg-shlibdeps from what the binaries link (libc, libstdc++, zlib); OpenCL, CUDA and the reference
# libraries are loaded at run time, so they are suggestions.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "ocl-icd-libopencl1, pocl-opencl-icd, libdnnl2, libclblast1")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
include(CPack)
