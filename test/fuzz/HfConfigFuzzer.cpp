//===- HfConfigFuzzer.cpp - Any text as a Hugging Face config.json --------===//
//
// Feeds every supported family's config parser (compiler/importers/
// HfConfig.h: deepseek_v32, gpt_oss, kimi_linear, glm5_next) the same
// arbitrary text; each refuses what is not its family. A config one
// accepts must give a finite, positive softmax scale (what the builders
// derive first from the head dims and YaRN).
//
//===----------------------------------------------------------------------===//

#include "compiler/importers/HfConfig.h"

#include <cmath>
#include <cstddef>
#include <cstdint>

using namespace daybreak::importers;

/// Consumes the error of `config`, or checks the scale of what it parsed.
template <typename Config> static void check(llvm::Expected<Config> config) {
  if (!config) {
    llvm::consumeError(config.takeError());
    return;
  }
  if constexpr (!std::is_same_v<Config, GptOssConfig>) {
    double scale = config->softmaxScale();
    if (!std::isfinite(scale) || scale <= 0)
      __builtin_trap();
  }
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  llvm::StringRef text(reinterpret_cast<const char *>(data), size);
  check(parseDeepseekV32Config(text, "config.json"));
  check(parseGptOssConfig(text, "config.json"));
  check(parseKimiLinearConfig(text, "config.json"));
  check(parseGlm5NextConfig(text, "config.json"));
  return 0;
}
