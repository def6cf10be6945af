#include "model/checkpoint_check.h"

#include "core/error.h"
#include "core/log.h"

#include <fmt/format.h>

#include <unordered_set>

namespace lingbot {

CheckpointCheck check_checkpoint(const io::StateDict& weights, const ModelConfig& config) {
  CheckpointCheck r;
  std::unordered_set<std::string> expected_names;
  for (const ExpectedTensor& e : expected_parameters(config)) {
    expected_names.insert(e.name);
    ++r.expected_count;
    const Tensor* t = weights.find(e.name);
    if (t == nullptr) {
      r.missing.push_back(e.name);
    } else if (t->shape() != e.shape) {
      r.mis_shaped.push_back({e.name, e.shape, t->shape()});
    } else if (!is_floating(t->dtype())) {
      r.non_float.push_back(e.name);
    } else {
      r.parameter_count += t->numel();
    }
  }
  for (const auto& [name, tensor] : weights) {
    if (!expected_names.count(name)) r.unexpected.push_back(name);
  }
  return r;
}

void require_loadable(const CheckpointCheck& check, const std::string& source, bool allow_extra_tensors) {
  LB_CHECK(check.ok(), "{}", check.summary(source));
  if (check.unexpected.empty()) return;
  constexpr size_t kNamed = 3;
  std::string named;
  for (size_t i = 0; i < check.unexpected.size() && i < kNamed; ++i)
    named += (i ? ", " : "") + check.unexpected[i];
  if (check.unexpected.size() > kNamed) named += fmt::format(", ... {} more", check.unexpected.size() - kNamed);
  const size_t n = check.unexpected.size();
  if (!allow_extra_tensors)
    fail("{}: {} tensor{} the model does not use ({}): refused (another model variant or renamed layers?); "
         "--allow-extra-tensors runs on it anyway",
         source, n, n == 1 ? "" : "s", named);
  log_warn("{}: {} tensor{} the model does not use ({}): ignored (--allow-extra-tensors)", source, n,
           n == 1 ? "" : "s", named);
}

std::string CheckpointCheck::summary(const std::string& source, size_t max_names) const {
  auto names = [&](const std::vector<std::string>& v) {
    std::string s;
    for (size_t i = 0; i < v.size() && i < max_names; ++i) s += (i ? ", " : "") + v[i];
    if (v.size() > max_names) s += fmt::format(", ... {} more", v.size() - max_names);
    return s;
  };
  std::vector<std::string> parts;
  if (!missing.empty()) parts.push_back(fmt::format("{} missing ({})", missing.size(), names(missing)));
  if (!mis_shaped.empty()) {
    std::string s;
    for (size_t i = 0; i < mis_shaped.size() && i < max_names; ++i)
      s += fmt::format("{}{}: expected {} found {}", i ? ", " : "", mis_shaped[i].name,
                       shape_str(mis_shaped[i].expected), shape_str(mis_shaped[i].found));
    if (mis_shaped.size() > max_names) s += fmt::format(", ... {} more", mis_shaped.size() - max_names);
    parts.push_back(fmt::format("{} mis-shaped ({})", mis_shaped.size(), s));
  }
  if (!non_float.empty()) parts.push_back(fmt::format("{} not floating point ({})", non_float.size(), names(non_float)));
  if (!unexpected.empty()) parts.push_back(fmt::format("{} unexpected ({})", unexpected.size(), names(unexpected)));
  if (parts.empty()) return fmt::format("{} matches the config ({} tensors)", source, expected_count);
  return fmt::format("{} does not fit the config: {}", source, fmt::join(parts, "; "));
}

}  // namespace lingbot
