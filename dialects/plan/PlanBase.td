//===- PlanBase.td - The plan dialect ----------------------*- tablegen -*-===//

#ifndef DAYBREAK_PLAN_BASE_TD
#define DAYBREAK_PLAN_BASE_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"

def Plan_Dialect : Dialect {
  let name = "plan";
  let cppNamespace = "::daybreak::plan";
  let summary = "How one step of a compiled model executes";
  let description = [{
    The `plan` dialect is what the artifact serialises and the runtime
    walks: weights at offsets in weight sections, cache pools with their
    layouts, and per step (`@prefill`, `@decode`) the buffers at offsets in
    one arena and the kernel launches and host steps in order. Grid sizes
    are affine expressions of the step's runtime sizes (token count, batch),
    so the runtime evaluates them without a compiler. Nothing in a plan
    allocates: the arena size is known when compilation ends.
  }];
  let dependentDialects = ["::daybreak::lm::LmDialect"];
  let useDefaultAttributePrinterParser = 1;
}

class Plan_Op<string mnemonic, list<Trait> traits = []>
    : Op<Plan_Dialect, mnemonic, traits>;

def Plan_HostStepKind : I32EnumAttr<"HostStepKind", "work the host does within a step", [
    I32EnumAttrCase<"ReadBack", 0, "read_back">,
    I32EnumAttrCase<"Sample", 1, "sample">,
    I32EnumAttrCase<"Copy", 2, "copy">]> {
  let cppNamespace = "::daybreak::plan";
  let genSpecializedAttr = 0;
}
def Plan_HostStepKindAttr : EnumAttr<Plan_Dialect, Plan_HostStepKind, "host_step">;

def Plan_KernelTarget : I32EnumAttr<"KernelTarget", "the device a kernel runs on", [
    I32EnumAttrCase<"Cpu", 0, "cpu">,
    I32EnumAttrCase<"Cuda", 1, "cuda">]> {
  let cppNamespace = "::daybreak::plan";
  let genSpecializedAttr = 0;
}
def Plan_KernelTargetAttr : EnumAttr<Plan_Dialect, Plan_KernelTarget, "target">;

#endif // DAYBREAK_PLAN_BASE_TD
