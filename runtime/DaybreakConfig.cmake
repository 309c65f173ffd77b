# find_package(Daybreak): the Daybreak runtime's libraries as imported
# targets (Daybreak::DaybreakExecutor and the layers below it).
include(CMakeFindDependencyMacro)
find_dependency(Protobuf)
find_dependency(Threads)
include(${CMAKE_CURRENT_LIST_DIR}/DaybreakTargets.cmake)
