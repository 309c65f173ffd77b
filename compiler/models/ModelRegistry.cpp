//===- ModelRegistry.cpp - The supported model families -------------------===//

#include "compiler/models/ModelRegistry.h"
#include "compiler/models/DeepseekV32.h"
#include "compiler/models/Glm5Next.h"
#include "compiler/models/GptOss.h"
#include "compiler/models/KimiLinear.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

using namespace daybreak;
using namespace daybreak::models;

ModelDefinition::~ModelDefinition() = default;

llvm::ArrayRef<ModelFamily> models::modelFamilies() {
  static const ModelFamily families[] = {
      {"deepseek_v32", &parseDeepseekV32Model},
      {"glm5_next", &parseGlm5NextModel},
      {"gpt_oss", &parseGptOssModel},
      {"kimi_linear", &parseKimiLinearModel},
  };
  return families;
}

static llvm::Error errorf(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

llvm::Expected<std::unique_ptr<ModelDefinition>>
models::loadModel(llvm::StringRef dir) {
  llvm::SmallString<256> path(dir);
  llvm::sys::path::append(path, "config.json");
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> buffer =
      llvm::MemoryBuffer::getFile(path, /*IsText=*/true);
  if (!buffer)
    return errorf("cannot read " + path + ": " + buffer.getError().message());
  llvm::StringRef text = (*buffer)->getBuffer();
  // Only model_type is read here; the family's parser reports everything
  // else (malformed JSON included) against its own fields.
  std::string modelType;
  if (llvm::Expected<llvm::json::Value> json = llvm::json::parse(text)) {
    if (const llvm::json::Object *object = json->getAsObject())
      if (std::optional<llvm::StringRef> type = object->getString("model_type"))
        modelType = type->str();
  } else {
    llvm::consumeError(json.takeError());
  }
  std::string supported;
  for (const ModelFamily &family : modelFamilies()) {
    if (modelType == family.modelType)
      return family.parse(text, path);
    supported += (supported.empty() ? "" : ", ") + std::string(family.modelType);
  }
  if (modelType.empty())
    // Let the first family's parser describe what is wrong with the file.
    return modelFamilies().front().parse(text, path);
  return errorf("unsupported model_type '" + modelType + "' in " + path +
                " (supported: " + supported + ")");
}
