#include "viewer/web_assets.h"

namespace lingbot::viewer {

const WebAsset* find_web_asset(std::string_view url_path) {
  if (url_path == "/") url_path = "/index.html";
  for (const WebAsset& a : web_assets())
    if (a.path == url_path) return &a;
  return nullptr;
}

}  // namespace lingbot::viewer
