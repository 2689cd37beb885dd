// What the export formats share: their table, and where torch-csv puts its side file. Each
// format's writer is in export_<format>.cpp.
#include "pulse/tools/export.hpp"

namespace pulse {

const std::vector<ExportFormat>& export_formats() {
  static const std::vector<ExportFormat> formats = {
      {"torch-csv", "stages"},
      {"dot", "model"},
      {"html", "compare"},
  };
  return formats;
}

std::string export_format_names() {
  const auto& formats = export_formats();
  std::string out;
  for (std::size_t i = 0; i < formats.size(); ++i) {
    if (i > 0) out += i + 1 == formats.size() ? " or " : ", ";
    out += formats[i].name;
  }
  return out;
}

std::string torch_stages_path(const std::string& csv_path) {
  const std::string ext = ".csv";
  if (csv_path.size() > ext.size() &&
      csv_path.compare(csv_path.size() - ext.size(), ext.size(), ext) == 0) {
    return csv_path.substr(0, csv_path.size() - ext.size()) + ".stages.json";
  }
  return csv_path + ".stages.json";
}

}  // namespace pulse
