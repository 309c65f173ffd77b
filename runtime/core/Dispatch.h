//===- Dispatch.h - One dispatch for every device ---------------*- C++ -*-===//
//
// A device supplies one launcher per kernel it implements, in a table
// indexed by kernel id; the dispatch here binds a prepared launch to the
// device's addresses and calls the launcher. The table is checked against
// an artifact's launches at load, so a kernel a device lacks is an error
// naming the launch before anything runs. Immutable tables: thread-safe.
//
//===----------------------------------------------------------------------===//

#ifndef DAYBREAK_RUNTIME_EXECUTOR_DISPATCH_H
#define DAYBREAK_RUNTIME_EXECUTOR_DISPATCH_H

#include "runtime/core/PreparedLaunch.h"

#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

namespace daybreak::runtime {

/// The launchers of device type `DeviceT`, by kernel id.
template <typename DeviceT> class LauncherTable {
public:
  using Launcher = Status (*)(DeviceT &, const BoundLaunch &);

  LauncherTable(std::initializer_list<std::pair<abi::KernelId, Launcher>> all) {
    for (const auto &[id, launcher] : all)
      launchers[static_cast<unsigned>(id)] = launcher;
  }
  void set(abi::KernelId id, Launcher launcher) {
    launchers[static_cast<unsigned>(id)] = launcher;
  }
  Launcher operator[](abi::KernelId id) const {
    return launchers[static_cast<unsigned>(id)];
  }
  /// An error naming the first launch of `steps` whose kernel has no
  /// launcher on device `device`.
  Status check(const std::vector<PreparedStep> &steps,
               const std::string &device) const {
    for (const PreparedStep &step : steps)
      for (const PreparedLaunch &l : step.launches)
        if (!(*this)[l.kernel])
          return Status::error(l.label + ": the " + device +
                               " device does not implement '" +
                               l.decl().name + "'");
    return Status::success();
  }

private:
  Launcher launchers[abi::kNumKernels] = {};
};

/// Binds `launch` for `tokens` tokens to `device`'s arena and weights and
/// runs its launcher. `DeviceT` provides arenaAddress() and
/// weightAddresses() (device addresses as integers).
template <typename DeviceT>
Status dispatch(DeviceT &device, const LauncherTable<DeviceT> &table,
                const PreparedLaunch &launch, int64_t tokens) {
  BoundLaunch bound;
  bindLaunch(launch, tokens, device.arenaAddress(), device.weightAddresses(),
             bound);
  return table[launch.kernel](device, bound);
}

} // namespace daybreak::runtime

#endif // DAYBREAK_RUNTIME_EXECUTOR_DISPATCH_H
