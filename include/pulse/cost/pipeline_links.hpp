// The link classes between the devices of one pipeline, shared by every copy.
//
// A pipeline of P devices has P x P links, but a cluster has a handful of link classes
// (NVLink inside a node, the network between nodes). The table keeps each distinct class
// once and a P x P index into them, and copies share one immutable table: every pipeline
// model, partition request and memo key of a plan holds the same links, and at pp 1024 a
// table of LinkClass values (a name and two numbers each) was 50 MB a copy, copied into
// every model the tuner built and every key the schedule memo kept.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "pulse/profile/profile.hpp"

namespace pulse {

/// Link classes between the devices of one pipeline, [from][to]; the diagonal is unused.
class PipelineLinks {
 public:
  /// One device's links, [to].
  class Row {
   public:
    const LinkClass& operator[](std::size_t to) const { return links_->at(from_, to); }
    std::size_t size() const { return links_->size(); }

   private:
    friend class PipelineLinks;
    Row(const PipelineLinks* links, std::size_t from) : links_(links), from_(from) {}
    const PipelineLinks* links_;
    std::size_t from_;
  };

  /// No devices.
  PipelineLinks() = default;
  /// n x n links, each `fill`.
  PipelineLinks(std::size_t n, const LinkClass& fill);
  /// From rows, each as long as there are rows (tests build small tables this way).
  explicit PipelineLinks(const std::vector<std::vector<LinkClass>>& rows);

  std::size_t size() const { return table_ ? table_->n : 0; }
  bool empty() const { return size() == 0; }
  Row operator[](std::size_t from) const { return Row(this, from); }
  const LinkClass& at(std::size_t from, std::size_t to) const {
    return table_->classes[table_->index[from * table_->n + to]];
  }
  /// Sets one link; the table is copied first if another copy shares it.
  void set(std::size_t from, std::size_t to, const LinkClass& link);

  /// The distinct classes of the links between two different devices.
  std::vector<LinkClass> classes_between_devices() const;

  /// Link by link (two copies of one table without looking).
  bool operator==(const PipelineLinks& other) const;

 private:
  struct Table {
    std::size_t n = 0;
    std::vector<LinkClass> classes;    ///< Distinct.
    std::vector<std::uint32_t> index;  ///< n x n, into classes.
  };
  std::uint32_t class_index(Table& table, const LinkClass& link);

  std::shared_ptr<const Table> table_;
};

}  // namespace pulse
