#include "pulse/cost/pipeline_links.hpp"

#include <algorithm>
#include <stdexcept>

namespace pulse {

PipelineLinks::PipelineLinks(std::size_t n, const LinkClass& fill) {
  auto table = std::make_shared<Table>();
  table->n = n;
  table->classes.push_back(fill);
  table->index.assign(n * n, 0);
  table_ = std::move(table);
}

PipelineLinks::PipelineLinks(const std::vector<std::vector<LinkClass>>& rows) {
  const std::size_t n = rows.size();
  auto table = std::make_shared<Table>();
  table->n = n;
  table->index.reserve(n * n);
  for (const std::vector<LinkClass>& row : rows) {
    if (row.size() != n) {
      throw std::invalid_argument("PipelineLinks: a row not as long as there are rows");
    }
    for (const LinkClass& link : row) table->index.push_back(class_index(*table, link));
  }
  table_ = std::move(table);
}

std::uint32_t PipelineLinks::class_index(Table& table, const LinkClass& link) {
  // A cluster has a handful of classes; the last one matched comes first, as neighbouring
  // links are mostly of one class.
  for (std::size_t k = table.classes.size(); k-- > 0;) {
    if (table.classes[k] == link) return static_cast<std::uint32_t>(k);
  }
  table.classes.push_back(link);
  return static_cast<std::uint32_t>(table.classes.size() - 1);
}

void PipelineLinks::set(std::size_t from, std::size_t to, const LinkClass& link) {
  // Copy on write: a table another copy holds is never changed under it. A count of one is
  // this object's own, which no other thread can copy while this one writes to it.
  std::shared_ptr<Table> table;
  if (table_.use_count() == 1) {
    table = std::const_pointer_cast<Table>(table_);
  } else {
    table = std::make_shared<Table>(*table_);
  }
  table->index[from * table->n + to] = class_index(*table, link);
  table_ = std::move(table);
}

std::vector<LinkClass> PipelineLinks::classes_between_devices() const {
  std::vector<LinkClass> out;
  if (!table_) return out;
  std::vector<bool> used(table_->classes.size(), false);
  for (std::size_t a = 0; a < table_->n; ++a) {
    for (std::size_t b = 0; b < table_->n; ++b) {
      if (a != b) used[table_->index[a * table_->n + b]] = true;
    }
  }
  for (std::size_t k = 0; k < used.size(); ++k) {
    if (used[k]) out.push_back(table_->classes[k]);
  }
  return out;
}

bool PipelineLinks::operator==(const PipelineLinks& other) const {
  if (table_ == other.table_) return true;
  if (size() != other.size()) return false;
  if (size() == 0) return true;
  if (table_->classes == other.table_->classes) return table_->index == other.table_->index;
  for (std::size_t a = 0; a < size(); ++a) {
    for (std::size_t b = 0; b < size(); ++b) {
      if (!(at(a, b) == other.at(a, b))) return false;
    }
  }
  return true;
}

}  // namespace pulse
