# FindCAF: locates the C++ Actor Framework 0.17 as Debian packages it (headers and shared
# libraries, but no CMake package config).
#
#   find_package(CAF 0.17 REQUIRED COMPONENTS core io)
#
# Defines CAF_FOUND, CAF_VERSION, CAF_INCLUDE_DIRS, CAF_LIBRARIES, and for each component
# <c> in {core, io, openssl}: CAF_<c>_FOUND, CAF_<c>_LIBRARY and the imported target CAF::<c>.
# Hint: -DCAF_ROOT=<prefix>.

set(_caf_components ${CAF_FIND_COMPONENTS})
if(NOT _caf_components)
  set(_caf_components core)
endif()
if("io" IN_LIST _caf_components AND NOT "core" IN_LIST _caf_components)
  list(APPEND _caf_components core)
endif()

find_path(CAF_INCLUDE_DIR NAMES caf/config.hpp HINTS ${CAF_ROOT} PATH_SUFFIXES include)

if(CAF_INCLUDE_DIR AND EXISTS "${CAF_INCLUDE_DIR}/caf/config.hpp")
  file(STRINGS "${CAF_INCLUDE_DIR}/caf/config.hpp" _caf_version_line
       REGEX "^#define CAF_VERSION [0-9]+")
  string(REGEX REPLACE "^#define CAF_VERSION ([0-9]+).*" "\\1" _caf_version_int "${_caf_version_line}")
  math(EXPR _caf_major "${_caf_version_int} / 10000")
  math(EXPR _caf_minor "(${_caf_version_int} / 100) % 100")
  math(EXPR _caf_patch "${_caf_version_int} % 100")
  set(CAF_VERSION "${_caf_major}.${_caf_minor}.${_caf_patch}")
endif()

set(CAF_LIBRARIES "")
foreach(_comp IN LISTS _caf_components)
  find_library(CAF_${_comp}_LIBRARY NAMES caf_${_comp} HINTS ${CAF_ROOT} PATH_SUFFIXES lib lib64)
  if(CAF_${_comp}_LIBRARY)
    set(CAF_${_comp}_FOUND TRUE)
    list(APPEND CAF_LIBRARIES ${CAF_${_comp}_LIBRARY})
  else()
    set(CAF_${_comp}_FOUND FALSE)
  endif()
endforeach()
set(CAF_INCLUDE_DIRS ${CAF_INCLUDE_DIR})

include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(CAF
  REQUIRED_VARS CAF_INCLUDE_DIR
  VERSION_VAR CAF_VERSION
  HANDLE_COMPONENTS)

if(CAF_FOUND)
  foreach(_comp IN LISTS _caf_components)
    if(CAF_${_comp}_FOUND AND NOT TARGET CAF::${_comp})
      add_library(CAF::${_comp} SHARED IMPORTED)
      set_target_properties(CAF::${_comp} PROPERTIES
        IMPORTED_LOCATION "${CAF_${_comp}_LIBRARY}"
        INTERFACE_INCLUDE_DIRECTORIES "${CAF_INCLUDE_DIR}")
    endif()
  endforeach()
  if(TARGET CAF::io AND TARGET CAF::core)
    set_property(TARGET CAF::io APPEND PROPERTY INTERFACE_LINK_LIBRARIES CAF::core)
  endif()
  if(TARGET CAF::core)
    find_package(Threads REQUIRED)
    set_property(TARGET CAF::core APPEND PROPERTY INTERFACE_LINK_LIBRARIES Threads::Threads)
  endif()
endif()
mark_as_advanced(CAF_INCLUDE_DIR)
