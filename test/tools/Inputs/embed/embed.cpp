// Loads an artifact with the installed Daybreak runtime, runs one prefill
// step on three tokens and prints the argmax of the last token's logits.
#include "runtime/executor/Model.h"

#include <algorithm>
#include <cstdio>

using namespace daybreak;

int main(int argc, char **argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: embed model.daybreak\n");
    return 2;
  }
  runtime::LoadOptions options;
  options.device = "cpu";
  StatusOr<std::unique_ptr<runtime::Model>> model =
      runtime::Model::load(argv[1], options);
  if (!model.ok()) {
    std::fprintf(stderr, "embed: %s\n", model.error().message().c_str());
    return 1;
  }
  runtime::StepInputs inputs;
  inputs.ids = {1, 17, 42};
  inputs.positions = {0, 1, 2};
  inputs.sequences = {0, 0, 0};
  std::vector<float> logits;
  Status status = (*model)->run("prefill", inputs, logits);
  if (!status.ok()) {
    std::fprintf(stderr, "embed: %s\n", status.message().c_str());
    return 1;
  }
  int64_t vocab = (*model)->vocabSize();
  const float *last = logits.data() + 2 * vocab;
  int64_t best = std::max_element(last, last + vocab) - last;
  std::printf("vocab %lld, next token %lld\n", (long long)vocab,
              (long long)best);
  return 0;
}
