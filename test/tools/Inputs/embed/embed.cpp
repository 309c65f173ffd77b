// Loads an artifact with the installed Daybreak runtime and serves two
// sequences at once through its session layer: each generates 4 tokens
// greedily from its prompt. Prints each sequence's tokens.
#include "runtime/executor/Session.h"

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
  runtime::Session session(**model);
  std::vector<runtime::SequenceId> ids;
  for (std::vector<int32_t> prompt : {std::vector<int32_t>{1, 17, 42},
                                      std::vector<int32_t>{5, 9, 2, 77}}) {
    runtime::SequenceRequest request;
    request.prompt = prompt;
    request.maxNewTokens = 4;
    StatusOr<runtime::SequenceId> id = session.admit(request);
    if (!id.ok()) {
      std::fprintf(stderr, "embed: %s\n", id.error().message().c_str());
      return 1;
    }
    ids.push_back(*id);
  }
  Status status = session.runToCompletion();
  if (!status.ok()) {
    std::fprintf(stderr, "embed: %s\n", status.message().c_str());
    return 1;
  }
  for (runtime::SequenceId id : ids) {
    std::printf("tokens:");
    for (int32_t t : session.status(id)->generated)
      std::printf(" %d", t);
    std::printf("\n");
  }
  return 0;
}
