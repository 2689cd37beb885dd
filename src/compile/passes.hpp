// The passes of one configuration and one family (level 2 of compile.cpp), in the order the
// driver calls them. Each times itself on `clock` under the name --stats prints (a
// PassClock::Run on its first line) and fills its part of `plan`. Private to src/compile.
#pragma once

#include <vector>

#include "compile_internal.hpp"
#include "pulse/partition/partition.hpp"

namespace pulse::detail {

/// What the passes of one family share besides the plan they fill.
struct PassState {
  const Family* family = nullptr;
  const LayerGraph* graph = nullptr;        ///< The model's layers at this microbatch size.
  const LayerGraph* partitioned = nullptr;  ///< What the partitioner sees.
  PartitionRequest request;                 ///< Partition: everything but the links.
  std::vector<int> wanted;                  ///< In-flight counts the schedule wants.
};

/// A plan for configuration `c` and family `f`, before any pass.
CompiledPlan start_plan(const CompileInputs& in, const Config& c, const Family& f);

/// "graph": the layers at this microbatch size on this device type, and the graph the
/// partitioner sees (a family blind to skips partitions the same layers without them).
void graph_pass(const CompileInputs& in, const Config& c, CompiledPlan& plan, PassState& st,
                PassClock& clock);

/// "place": ranks for every pipeline, the boundaries weighed equally.
void place_pass(const CompileInputs& in, const Config& c, CompiledPlan& plan, PassClock& clock);

/// "partition": the layers cut into the family's stages (the V, waves or a chain) on the
/// links of the placement, with the in-flight counts the schedule wants, else (memory) with
/// one microbatch in flight per device.
Status partition_pass(const CompileInputs& in, const Config& c, CompiledPlan& plan, PassState& st,
                      PassClock& clock);

/// "pipeline model": stage costs, transfers and where every skip lives, times on the quantum.
void pipeline_model_pass(const CompileInputs& in, CompiledPlan& plan, const PassState& st,
                         PassClock& clock);

/// "re-place": the ranks again, each boundary weighed by the bytes the partition moves across
/// it; on new links the cuts may shift, so partition and model again.
Status replace_pass(const CompileInputs& in, const Config& c, CompiledPlan& plan, PassState& st,
                    PassClock& clock);

/// The activation budget per device the options ask for (--activation-budget, bytes or a
/// fraction of the usable memory); 0: none.
std::int64_t activation_budget(const PlanOptions& o, const ClusterProfile& cluster);

/// "memory limits": each device's static state, and how many microbatches it can hold in
/// flight whatever the order of its ops (cost/memory.hpp).
/// No schedule of the placed plan `placed` within each device's memory has a shorter
/// makespan: the synthesizer's bound (synthesis_lower_bound), kept in the job's memo where
/// the plan's syntheses find it; infinity when not one microbatch fits a device.
double schedule_bound(const CompileInputs& in, const CompiledPlan& placed);

void memory_limits_pass(const CompileInputs& in, CompiledPlan& plan, PassClock& clock);

/// "schedule": the synthesizer (list schedules, searches, integer programs) at `effort`, or
/// the baseline's own schedule.
Status schedule_pass(const CompileInputs& in, CompiledPlan& plan, Effort effort, PassClock& clock);

/// Whether the full synthesis of a configuration would answer exactly as its screen did,
/// `screened` being the screen's plan (synthesis_repeats, synthesize.hpp): then the full
/// effort's plan is that one. Timed as "schedule" (it may compute the bound the probe needs).
bool full_repeats_screen(const CompileInputs& in, const CompiledPlan& screened, PassClock& clock);

/// "evaluate": the data-parallel all-reduce, iteration time, throughput, bubble.
void evaluate_pass(const CompileInputs& in, CompiledPlan& plan, PassClock& clock);

/// "memory curve", on the plan kept only: of its schedules equally fast, the one holding
/// least (the second objective), and what smaller activation budgets would cost. Times
/// never change, so the choice among candidates stands.
Status memory_curve_pass(const CompileInputs& in, CompiledPlan& plan, PassClock& clock);

}  // namespace pulse::detail
