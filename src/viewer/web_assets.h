// The page's files (src/viewer/web), built into the binary by CMake
// (cmake/EmbedFiles.cmake generates their definition), so the server hands
// out exactly these and never opens a file-system path for a request.
#pragma once

#include <span>
#include <string_view>

namespace lingbot::viewer {

struct WebAsset {
  std::string_view path;          // URL path: "/index.html", "/vendor/three.module.min.js"
  std::string_view content_type;  // "text/html; charset=utf-8", ...
  std::string_view bytes;
};

std::span<const WebAsset> web_assets();
// The asset at a URL path ("/" is "/index.html"), or null.
const WebAsset* find_web_asset(std::string_view url_path);

}  // namespace lingbot::viewer
