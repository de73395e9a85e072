// Phases and iterations (see src/analysis/attribution_parts.hpp and
// docs/attribution.md): every event is placed in a span of (iteration,
// phase), in five steps: the optimizer annotations as time spans; each
// event's hint (its stack's, or the annotation it lies in); the steps that
// allocated nothing; the walk that turns hints into phases and iterations
// (or, without frames that tell forward from backward, the split of each
// stretch by its shape); the spans.
#include <algorithm>

#include "analysis/engine/attribution_parts.hpp"
#include "util/hugepages.hpp"

namespace snapdiff::detail {

namespace {

class PhaseFinder {
 public:
  PhaseFinder(const Trace& t, const Device& d, RuleMatcher& m, LazyReplay& replay,
              const std::vector<uint32_t>& alloc_of_event, Attribution& a)
      : t_(t), d_(d), m_(m), replay_(replay), alloc_of_event_(alloc_of_event), a_(a), n_(d.events.size()) {}

  void run() {
    optimizer_spans();
    hint_events();
    find_empty_steps();
    a_.phase_evidence = any_frames_ ? "stack frames" : "no stacks";
    if (!opt_spans_.empty()) a_.phase_evidence += " + optimizer annotations";
    detail::assign_huge(phase_, n_, Phase::Init);
    detail::assign_huge(iter_, n_, 0);
    if (!any_fb_ && !opt_spans_.empty()) {
      for (int8_t& h : hint_)
        if (h == kHintOptFrame) h = int8_t(Phase::Optimizer);
      // No frames tell forward from backward: between optimizer steps the
      // forward builds memory up and the backward releases it, so split each
      // stretch at its requested-bytes maximum.
      split_by_shape();
      a_.phase_evidence += " + lifetimes (the backward starts with the first buffer kept for the optimizer step)";
    } else {
      walk_phases();
    }
    build_spans();
  }

 private:
  void optimizer_spans();
  size_t annotation_before(int64_t t);
  void hint_events();
  void find_empty_steps();
  void walk_phases();
  void step(size_t i);
  void apply_hint(int8_t h);
  void split_by_shape();
  void add_empty_span(size_t at, size_t k);
  void build_spans();

  const Trace& t_;
  const Device& d_;
  RuleMatcher& m_;
  LazyReplay& replay_;
  const std::vector<uint32_t>& alloc_of_event_;
  Attribution& a_;
  const size_t n_;  // events
  // Optimizer annotations (record_function "Optimizer.step#...") as time spans, in order.
  std::vector<std::pair<int64_t, int64_t>> opt_spans_;
  size_t last_ann_ = 0;  // annotation_before(): opt_spans_[last_ann_ - 1] is the previous answer
  // Per event, its hint: a phase, kHintNone, kHintEmpty or kHintOptFrame.
  std::vector<int8_t> hint_;
  // Per event, the optimizer annotation its time lies in (-1: none; empty
  // without annotations); per annotation, whether any event lies in it.
  std::vector<int32_t> ann_;
  std::vector<uint8_t> ann_hit_;
  bool any_frames_ = false, any_fb_ = false;
  // Steps that allocated and freed nothing: (first event after, annotation),
  // in order, and the iteration of each.
  std::vector<std::pair<size_t, size_t>> empty_steps_;
  std::vector<int> empty_iter_;
  // Per event, its phase and iteration.
  std::vector<Phase> phase_;
  std::vector<int32_t> iter_;
  // The walk's state (walk_phases()).
  Phase cur_ = Phase::Init;
  int it_ = 0;
  bool after_bwd_or_opt_ = false;
  size_t next_empty_ = 0;
  bool steps_timed_ = false;   // timed step annotations bound the iterations
  bool opt_from_ann_ = false;  // the current optimizer phase is an annotated step's
  bool post_step_ = false;     // in "other" right after an annotated step, its iteration
  int32_t opt_ann_ = -1;       // the annotation of the last event of an annotated optimizer phase
  // Per event, the next allocation's hint that is not kHintOptFrame: a
  // user's step() is followed by its forward, an update loop is not.
  std::vector<int8_t> next_hint_;
};

void PhaseFinder::optimizer_spans() {
  std::vector<int64_t> starts;
  for (const Annotation& an : t_.annotations) {
    if (an.device != d_.index && an.device != -1) continue;
    std::string_view name = t_.strings.get(an.name);
    if (name.rfind("Optimizer.step", 0) != 0) continue;
    if (an.start) starts.push_back(an.time_us);
    else if (!starts.empty()) {
      opt_spans_.push_back({starts.back(), an.time_us});
      starts.pop_back();
    }
  }
  std::sort(opt_spans_.begin(), opt_spans_.end());
}

// How many annotations start at or before a time: the previous event's
// answer or the next one's when it still holds (times mostly ascend), else
// a binary search (times of events on several streams need not be in order).
size_t PhaseFinder::annotation_before(int64_t t) {
  const size_t m = opt_spans_.size();
  auto fits = [&](size_t k) {  // k annotations start at or before t
    return (k == 0 || opt_spans_[k - 1].first <= t) && (k == m || opt_spans_[k].first > t);
  };
  if (fits(last_ann_)) return last_ann_;
  if (last_ann_ < m && fits(last_ann_ + 1)) return ++last_ann_;
  last_ann_ = size_t(std::upper_bound(opt_spans_.begin(), opt_spans_.end(), std::make_pair(t, INT64_MAX)) -
                     opt_spans_.begin());
  return last_ann_;
}

// Per event, its hint; an annotation no event lies in is a step that
// allocated and freed nothing: an optimizer phase without events, placed
// before the first event after it (find_empty_steps()).
void PhaseFinder::hint_events() {
  const auto& ev = d_.events;
  detail::assign_huge(hint_, n_, kHintEmpty);
  ann_hit_.assign(opt_spans_.size(), 0);
  if (!opt_spans_.empty()) detail::assign_huge(ann_, n_, -1);
  for (size_t i = 0; i < n_; ++i) {
    const Event& e = ev[i];
    int8_t h = e.kind == EventKind::Alloc ? m_.stack_hint(e.stack) : kHintEmpty;
    if (h != kHintEmpty) any_frames_ = true;
    if (!opt_spans_.empty() && e.time_us != kNoTime) {
      const size_t k = annotation_before(e.time_us);
      if (k > 0 && opt_spans_[k - 1].second >= e.time_us) {
        const size_t osp = k - 1;
        ann_[i] = int32_t(osp);
        ann_hit_[osp] = 1;
      }
    }
    // With timed step annotations the step is where they say: a frame
    // named like an optimizer outside them counts only after a backward
    // (a user's own update loop); before the forward it is a user's
    // step() around forward and backward, and says nothing.
    if (h == int8_t(Phase::Optimizer) && !opt_spans_.empty() && e.time_us != kNoTime && ann_[i] < 0) h = kHintOptFrame;
    if (h == int8_t(Phase::Forward) || h == int8_t(Phase::Backward)) any_fb_ = true;
    hint_[i] = h;
  }
  if (opt_spans_.empty()) return;
  // Inside an annotated step every event is the optimizer's, but for the
  // calls of a closure (optimizer.step(closure): Lightning, LBFGS): a call
  // runs from an allocation whose frames say forward or backward to the
  // step's next allocation from optimizer code after the call's backward.
  // Its events keep their frames' hints (the frameless ones, the autograd
  // engine's, stay in the backward); user code under the step's frames
  // before the backward (the loss) says nothing. A step that allocates
  // nothing outside its closure is a step without events of its own
  // (find_empty_steps()).
  std::vector<uint8_t> in_call(opt_spans_.size(), 0);  // per annotation: 0 outside a call, 1 in it, 2 after its backward
  std::vector<uint8_t> own(opt_spans_.size(), 0);      // per annotation: it has events of its own
  for (size_t i = 0; i < n_; ++i) {
    const int32_t k = ann_[i];
    if (k < 0) continue;
    uint8_t& c = in_call[size_t(k)];
    const int8_t h = hint_[i];
    if (h == int8_t(Phase::Forward) || h == int8_t(Phase::Backward)) {
      // (a forward after the call's backward, a checkpointed layer's
      // recomputation, is still the call's backward's)
      if (h == int8_t(Phase::Backward)) c = 2;
      else if (c == 0) c = 1;
    } else if (c != 0 && h == int8_t(Phase::Optimizer)) {
      if (c == 2) {
        c = 0;  // the call returned: the step's own work
        own[size_t(k)] = 1;
      } else {
        hint_[i] = kHintNone;
      }
    } else if (c == 0) {
      hint_[i] = int8_t(Phase::Optimizer);
      own[size_t(k)] = 1;
    }
  }
  for (size_t k = 0; k < opt_spans_.size(); ++k)
    if (!own[k]) ann_hit_[k] = 0;
}

void PhaseFinder::find_empty_steps() {
  const auto& ev = d_.events;
  // Only steps inside the recorded window: annotations are kept apart
  // from the ring of events and outlive its oldest entries.
  int64_t first_t = kNoTime;
  for (size_t i = 0; i < n_ && first_t == kNoTime; ++i) first_t = ev[i].time_us;
  size_t k = 0;
  for (size_t j = 0; j < opt_spans_.size(); ++j) {
    if (ann_hit_[j] || first_t == kNoTime || opt_spans_[j].second < first_t) continue;
    while (k < n_ && (ev[k].time_us == kNoTime || ev[k].time_us <= opt_spans_[j].second)) ++k;
    empty_steps_.push_back({k, j});
  }
}

// Hints to phases and iterations, event by event.
void PhaseFinder::walk_phases() {
  steps_timed_ = !empty_steps_.empty();
  for (size_t j = 0; j < opt_spans_.size() && !steps_timed_; ++j) steps_timed_ = ann_hit_[j];
  if (!opt_spans_.empty()) {
    detail::assign_huge(next_hint_, n_, kHintEmpty);
    int8_t nh = kHintEmpty;
    for (size_t i = n_; i-- > 0;) {
      next_hint_[i] = nh;
      if (hint_[i] != kHintOptFrame && hint_[i] != kHintEmpty) nh = hint_[i];
    }
  }
  for (size_t i = 0; i < n_; ++i) step(i);
  for (; next_empty_ < empty_steps_.size(); ++next_empty_) empty_iter_.push_back(std::max(it_, 1));
}

void PhaseFinder::step(size_t i) {
  for (; next_empty_ < empty_steps_.size() && empty_steps_[next_empty_].first <= i; ++next_empty_) {
    // A step that allocated nothing: it ends the iteration like any other.
    if (cur_ == Phase::Init) it_ = std::max(it_, 1);
    empty_iter_.push_back(it_);
    cur_ = Phase::Optimizer;
    after_bwd_or_opt_ = true;
    opt_from_ann_ = true;
  }
  int8_t h = hint_[i];
  const bool timed_outside = !ann_.empty() && ann_[i] < 0 && d_.events[i].time_us != kNoTime;
  if (h == kHintEmpty && cur_ == Phase::Optimizer && opt_from_ann_ && timed_outside) {
    // After an annotated step ended: frees completing late and
    // frameless work are not the step. They stay in its iteration
    // (the run may end here); what the user's code allocates next
    // starts the next one.
    cur_ = Phase::Other;
    opt_from_ann_ = false;
    post_step_ = true;
  }
  if (h == kHintOptFrame)
    h = (cur_ == Phase::Backward || cur_ == Phase::Optimizer || post_step_) && next_hint_[i] != int8_t(Phase::Forward)
            ? int8_t(Phase::Optimizer)
            : kHintNone;
  if (h == int8_t(Phase::Optimizer)) opt_from_ann_ = !ann_.empty() && ann_[i] >= 0;
  // A closure called again by the same step (LBFGS) is the same iteration.
  if (h == int8_t(Phase::Forward) && !ann_.empty() && ann_[i] >= 0 && ann_[i] == opt_ann_) after_bwd_or_opt_ = false;
  apply_hint(h);
  phase_[i] = cur_;
  iter_[i] = it_;
  if (cur_ == Phase::Optimizer && !ann_.empty() && ann_[i] >= 0) opt_ann_ = ann_[i];
}

void PhaseFinder::apply_hint(int8_t h) {
  if (h == kHintEmpty) {
    // keep the current phase (autograd engine threads record no frames)
  } else if (h == kHintNone) {
    // user code outside any hint: the loss belongs to the forward; after
    // an optimizer step it is the next iteration's data loading.
    if (cur_ == Phase::Init || cur_ == Phase::Optimizer || (cur_ == Phase::Other && post_step_)) {
      ++it_;
      cur_ = Phase::Other;
      after_bwd_or_opt_ = false;
      post_step_ = false;
    } else if (cur_ == Phase::Backward) {
      cur_ = Phase::Other;
    }
  } else {
    Phase p = Phase(h);
    post_step_ = post_step_ && p == Phase::Init;
    if (p == Phase::Init) {
      if (cur_ != Phase::Init) cur_ = Phase::Other;
    } else {
      if (cur_ == Phase::Init) {
        it_ = std::max(it_, 1);
        after_bwd_or_opt_ = false;
      } else if (p == Phase::Forward && after_bwd_or_opt_) {
        ++it_;
        after_bwd_or_opt_ = false;
      }
      // With step annotations an iteration is one optimizer step, all
      // its micro-batches (gradient accumulation) included; without
      // them a forward after a backward starts the next one.
      if ((p == Phase::Backward && !steps_timed_) || p == Phase::Optimizer) after_bwd_or_opt_ = true;
      cur_ = p;
    }
  }
}

// Without frames that tell forward from backward: the optimizer events,
// and between them stretches split at the backward's start.
void PhaseFinder::split_by_shape() {
  const DeviceReplay& rp = replay_();
  const size_t n = n_;
  const std::vector<int8_t>& hint = hint_;
  std::vector<Phase>& phase = phase_;
  std::vector<int32_t>& iter = iter_;
  // Mark optimizer events, then walk stretches between them.
  int it = 0;
  size_t i = 0;
  bool first = true;
  while (i < n) {
    if (hint[i] == int8_t(Phase::Optimizer)) {
      size_t j = i;
      while (j < n && (hint[j] == int8_t(Phase::Optimizer) || d_.events[j].kind != EventKind::Alloc)) ++j;
      for (size_t k = i; k < j; ++k) phase[k] = Phase::Optimizer, iter[k] = std::max(it, 1);
      i = j;
      continue;
    }
    size_t j = i;
    while (j < n && hint[j] != int8_t(Phase::Optimizer)) ++j;
    // [i, j): a forward+backward stretch. The first one starts with the
    // model build: the allocations made before the first one that is
    // freed again within the stretch (parameters are kept).
    if (first) {
      size_t k = i;
      for (; k < j; ++k) {
        uint32_t id = alloc_of_event_[k];
        if (id == UINT32_MAX || d_.events[k].kind != EventKind::Alloc) continue;
        if (a_.allocations[id].free_event < int64_t(j)) break;
      }
      // Back up to the last allocation that outlives the stretch.
      size_t init_end = i;
      for (size_t q = i; q < k; ++q)
        if (d_.events[q].kind == EventKind::Alloc) init_end = q + 1;
      for (size_t q = i; q < init_end; ++q) phase[q] = Phase::Init, iter[q] = 0;
      i = init_end;
      first = false;
      if (i >= j) continue;
    }
    ++it;
    // The backward starts with the first allocation that survives into
    // the optimizer step (the first gradient); without one, at the
    // stretch's memory maximum.
    size_t split = j;
    bool freed_yet = false;  // the input batch comes before any free
    for (size_t k = i; k < j; ++k) {
      if (d_.events[k].kind == EventKind::FreeRequested) freed_yet = true;
      if (!freed_yet) continue;
      uint32_t id = alloc_of_event_[k];
      if (id == UINT32_MAX || d_.events[k].kind != EventKind::Alloc) continue;
      if (a_.allocations[id].free_event > int64_t(j) && j < n) {
        split = k;
        break;
      }
    }
    if (split == j) {
      split = i;
      for (size_t k = i; k < j; ++k)
        if (rp.requested[k] > rp.requested[split]) split = k;
      ++split;
    }
    for (size_t k = i; k < j; ++k) {
      phase[k] = k < split ? Phase::Forward : Phase::Backward;
      iter[k] = it;
    }
    i = j;
  }
}

void PhaseFinder::add_empty_span(size_t at, size_t k) {
  PhaseSpan s;
  s.iteration = k < empty_iter_.size() ? empty_iter_[k] : 1;
  s.phase = Phase::Optimizer;
  s.start_event = int64_t(at);
  s.end_event = int64_t(at) - 1;
  a_.spans.push_back(s);
  a_.iterations = std::max(a_.iterations, s.iteration);
}

// Spans of equal (iteration, phase); each optimizer annotation is a span of
// its own (two optimizers step one after the other), an empty step one
// without events.
void PhaseFinder::build_spans() {
  detail::assign_huge(a_.event_span, n_, 0u);
  size_t next_empty = 0;
  int32_t span_ann = -1;
  for (size_t i = 0; i < n_; ++i) {
    for (; next_empty < empty_steps_.size() && empty_steps_[next_empty].first <= i && next_empty < empty_iter_.size();
         ++next_empty)
      add_empty_span(i, next_empty);
    // (A span's annotation is that of its first annotated event; a user's
    // update loop around the step shares the span.)
    const int32_t an = ann_.empty() ? -1 : ann_[i];
    const bool new_step = phase_[i] == Phase::Optimizer && an >= 0 && span_ann >= 0 && an != span_ann;
    if (a_.spans.empty() || a_.spans.back().empty() || new_step || a_.spans.back().phase != phase_[i] ||
        a_.spans.back().iteration != iter_[i]) {
      span_ann = -1;
      PhaseSpan s;
      s.iteration = iter_[i];
      s.phase = phase_[i];
      s.start_event = int64_t(i);
      a_.spans.push_back(s);
      a_.iterations = std::max(a_.iterations, iter_[i]);
    }
    a_.spans.back().end_event = int64_t(i);
    a_.event_span[i] = uint32_t(a_.spans.size() - 1);
    if (phase_[i] == Phase::Optimizer && an >= 0 && span_ann < 0) span_ann = an;
  }
  for (; next_empty < empty_steps_.size() && next_empty < empty_iter_.size(); ++next_empty) add_empty_span(n_, next_empty);
}

}  // namespace

void find_phases(const Trace& t, const Device& d, RuleMatcher& m, LazyReplay& replay,
                 const std::vector<uint32_t>& alloc_of_event, Attribution& a) {
  PhaseFinder(t, d, m, replay, alloc_of_event, a).run();
}

void measure_spans(const DeviceReplay& rp, Attribution& a) {
  for (PhaseSpan& s : a.spans) {
    s.start_requested = s.start_event > 0 ? rp.requested[size_t(s.start_event - 1)] : rp.baseline.requested;
    if (s.empty()) {
      s.peak_event = s.start_event - 1;
      s.peak_requested = s.start_requested;
      continue;
    }
    s.peak_event = s.start_event;
    s.peak_requested = rp.requested[size_t(s.start_event)];
    for (int64_t i = s.start_event; i <= s.end_event; ++i)
      if (rp.requested[size_t(i)] > s.peak_requested) {
        s.peak_requested = rp.requested[size_t(i)];
        s.peak_event = i;
      }
  }
}

int64_t SpanQueries::next_span_start(int64_t after_event, Phase p) {
  size_t s = after_event < 0 ? a_.spans.size() : a_.event_span[size_t(after_event)];
  auto& cache = next_start_[int(p)];
  if (cache.empty()) {
    cache.assign(a_.spans.size() + 1, INT64_MAX);
    int64_t nxt = INT64_MAX;
    for (size_t k = a_.spans.size(); k-- > 0;) {
      cache[k] = nxt;  // next strictly after span k
      // An empty step runs between the event before it and its start_event.
      if (a_.spans[k].phase == p) nxt = a_.spans[k].start_event - (a_.spans[k].empty() ? 1 : 0);
    }
    cache[a_.spans.size()] = nxt;  // from before the first span
  }
  return cache[s];
}

int SpanQueries::category(const char* name) const {
  for (size_t i = 0; i < a_.categories.size(); ++i)
    if (a_.categories[i] == name) return int(i);
  return -1;
}

}  // namespace snapdiff::detail

namespace snapdiff {

Phase Attribution::phase_at(int64_t e) const {
  if (e < 0 || size_t(e) >= event_span.size()) return Phase::PreTrace;
  return spans[event_span[size_t(e)]].phase;
}

int Attribution::iteration_at(int64_t e) const {
  if (e < 0 || size_t(e) >= event_span.size()) return 0;
  return spans[event_span[size_t(e)]].iteration;
}

}  // namespace snapdiff
