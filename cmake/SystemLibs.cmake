# zlib (PNG figures of `g4c bench --plot`) and liblzma (reading .xz tokenizers), from Debian's
# zlib1g-dev and liblzma-dev. Executables link the static archives, so the g4c binary stays
# self-contained (tests/build/check_static.sh); shared objects (the Python module) link the
# shared libraries, since Debian's archives are not built for shared objects.
find_package(PkgConfig REQUIRED)
pkg_check_modules(G4C_PC_ZLIB REQUIRED IMPORTED_TARGET zlib)
pkg_check_modules(G4C_PC_LZMA REQUIRED IMPORTED_TARGET liblzma)

function(g4c_system_lib name pc_target archive_name)
  find_library(G4C_${name}_ARCHIVE NAMES ${archive_name} HINTS ${G4C_PC_${name}_LIBRARY_DIRS})
  add_library(g4c_${name} INTERFACE)
  target_include_directories(g4c_${name} INTERFACE ${G4C_PC_${name}_INCLUDE_DIRS})
  if(G4C_${name}_ARCHIVE)
    # $<TARGET_PROPERTY:TYPE> is the type of the target being linked (the head target).
    target_link_libraries(g4c_${name} INTERFACE
      "$<IF:$<STREQUAL:$<TARGET_PROPERTY:TYPE>,EXECUTABLE>,${G4C_${name}_ARCHIVE},${pc_target}>")
  else()
    target_link_libraries(g4c_${name} INTERFACE ${pc_target})
  endif()
endfunction()

g4c_system_lib(ZLIB PkgConfig::G4C_PC_ZLIB libz.a)
g4c_system_lib(LZMA PkgConfig::G4C_PC_LZMA liblzma.a)
