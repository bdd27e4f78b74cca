# bench/widen-route-trace.awk: widens the decode routing of a small trained
# MoE's route trace (telemetry.md, route trace v1) into a route trace of a
# model with more layers, four times the experts and twice the experts a token
# uses, which --route-replay can drive a full-size model with: here the
# trained 6-layer x 32-expert x top-4 qwen3moe onto the 48-layer x
# 128-expert x top-8 Qwen3-30B-A3B shape.
#
#   awk -v n_layer=48 [-v layers_from=FULL.route.csv] -f bench/widen-route-trace.awk TRAINED.route.csv > WIDE.route.csv
#
# With D the trace's decode steps and n its layers, full layer L takes trained
# layer l = L mod n and tile t = L div n (n_layer / n tiles, T). At decode
# step s its slots 0..k-1 (k: the trace's experts a token uses) are trained
# layer l's routing at step s1 = (s + t*D/T) mod D and slots k..2k-1 that at
# s2 = (s1 + D/2 + D/16) mod D. Slots 0..k-1 get the ids e + E*b1 and slots
# k..2k-1 2E + e + E*b2 (E: the trace's experts), where b1 (b2) is the parity
# of trained layer ((l+1) mod n)'s top expert at step s1 (s2).
#
# What it keeps of the real routing: each half of a widened routing is one
# real routing of one trained layer, so every layer keeps that layer's skew
# (within each half) and its step-to-step reuse (consecutive steps stay
# consecutive; the replay wraps at D as the trace does); the bits that spread
# the ids over the wider range are real too, skewed and correlated in time as
# the trained router's top choices are. What it invents: the pairing of two
# moments in one routing, the tiles (the T full layers made from one trained
# layer are that layer at T different moments, not T layers), and the bits'
# role (the two halves never share an expert and each half moves between its
# two blocks of E ids as a whole). The D/16 keeps the 2T moments distinct:
# with D/2 alone, when T is even, tile t + T/2's first half would replay the
# moment of tile t's second half, the same real window twice. Weights are
# the trained ones halved, so that a routing's sum to one as the normalised
# router's do ("nan" stays "nan"); residency, expert_bytes and dropped, which
# only a run could say, are left out (their columns are optional). The
# "# layer=" lines (each layer's expert_bytes: what bmoe-analyze route prices a
# miss at) are copied from layers_from, a route trace of the full model, when
# it is given; the replay needs none.
BEGIN {
  FS = ","
  if (n_layer !~ /^[0-9]+$/ || n_layer + 0 <= 0)
    fail("pass -v n_layer=N, the layers of the widened trace")
  while (layers_from != "" && (status = (getline line < layers_from)) > 0 && line ~ /^#/)
    if (line ~ /^# layer=[0-9]+ / && meta(line, "layer") < n_layer + 0)
      layer_lines[n_layer_lines++] = line
  if (status < 0)
    fail("cannot read " layers_from)
  if (layers_from != "" && n_layer_lines != n_layer)
    fail(layers_from " has " n_layer_lines " '# layer=' lines for the " n_layer " layers")
}

function fail(message) {
  print "widen-route-trace.awk: " message > "/dev/stderr"
  failed = 1
  exit 1
}

# the value of KEY=N in a "#" line, or -1
function meta(line, key,    rest) {
  if (!match(line, "(^|[ #])" key "=[0-9]+"))
    return -1
  rest = substr(line, RSTART, RLENGTH)
  sub(/^.*=/, "", rest)
  return rest + 0
}

FNR == 1 {
  if ($0 !~ /^# route_trace v1/)
    fail(FILENAME " is not a route trace v1")
  next
}
/^#/ {
  if (meta($0, "n_layer") > 0) {
    in_layers = meta($0, "n_layer")
    in_experts = meta($0, "n_expert")
    in_used = meta($0, "n_expert_used")
    arch = $0
    if (!sub(/.*arch=/, "", arch))
      arch = "?"
    sub(/ .*/, "", arch)
  }
  next
}
!have_columns {
  for (i = 1; i <= NF; i++)
    column[$i] = i
  if (!("phase" in column) || !("step" in column) || !("layer" in column) || !("slot" in column) ||
      !("expert" in column) || !("turn" in column))
    fail(FILENAME ": no turn, phase, step, layer, slot and expert columns")
  have_columns = 1
  next
}
$column["phase"] == 1 {
  step = $column["step"] + 0
  layer = $column["layer"] + 0
  slot = $column["slot"] + 0
  if (turn == "")
    turn = $column["turn"]
  else if ($column["turn"] != turn)
    fail(FILENAME ": decode steps of more than one turn")
  if (layer < 0 || layer >= in_layers || slot < 0 || slot >= in_used ||
      $column["expert"] < 0 || $column["expert"] >= in_experts)
    fail(FILENAME " line " FNR ": a routing outside the preamble's shape")
  expert[step, layer, slot] = $column["expert"] + 0
  w = ("weight" in column) ? $column["weight"] : "nan"
  weight[step, layer, slot] = (w ~ /^-?[0-9.]+([eE][-+]?[0-9]+)?$/) ? sprintf("%.6g", w / 2) : "nan"
  if (n_rows++ == 0 || step < first)
    first = step
  if (step > last)
    last = step
}

END {
  if (failed)
    exit 1
  if (in_layers <= 0 || in_experts <= 0 || in_used <= 0)
    fail("the trace's preamble has no n_layer, n_expert and n_expert_used")
  if (n_rows == 0)
    fail("the trace has no decode steps")
  if (n_layer % in_layers)
    fail("n_layer " n_layer " is not a multiple of the trace's " in_layers)
  steps = last - first + 1
  tiles = n_layer / in_layers
  for (s = first; s <= last; s++)
    for (l = 0; l < in_layers; l++)
      for (k = 0; k < in_used; k++)
        if (!((s, l, k) in expert))
          fail("step " s " layer " l " slot " k " is missing: a replay needs every decode step whole")
  used = 2 * in_used
  print "# route_trace v1"
  print "# model=widened arch=" arch " n_layer=" n_layer " n_expert=" 4 * in_experts " n_expert_used=" used
  print "# widened by bench/widen-route-trace.awk from " FILENAME ": " in_layers " layers x " in_experts \
    " experts x top-" in_used ", " steps " decode steps"
  for (i = 0; i < n_layer_lines; i++)
    print layer_lines[i]
  print "turn,phase,step,layer,slot,expert,weight"
  for (s = 0; s < steps; s++)
    for (L = 0; L < n_layer; L++) {
      l = L % in_layers
      t = int(L / in_layers)
      s1 = (s + int(t * steps / tiles)) % steps
      s2 = (s1 + int(steps / 2) + int(steps / 16)) % steps
      next_l = (l + 1) % in_layers
      b1 = expert[first + s1, next_l, 0] % 2
      b2 = expert[first + s2, next_l, 0] % 2
      for (k = 0; k < used; k++) {
        if (k < in_used) {
          id = expert[first + s1, l, k] + in_experts * b1
          w = weight[first + s1, l, k]
        } else {
          id = 2 * in_experts + expert[first + s2, l, k - in_used] + in_experts * b2
          w = weight[first + s2, l, k - in_used]
        }
        if ((L, id) in seen_at && seen_at[L, id] == s)
          fail("step " s " layer " L ": expert " id " twice in one routing")
        seen_at[L, id] = s
        print turn "," 1 "," first + s "," L "," k "," id "," w
      }
    }
}
