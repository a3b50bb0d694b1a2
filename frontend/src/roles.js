// One colour and label per variable role and per peak category, so every
// chart, card and chip agrees.

// The variable roles (the backend's schema/names.py ROLES); tests/test_layering.py ties the two.
export const ROLES = ["weight", "non_trainable", "optimizer_slot", "other"];

export const ROLE_LABEL = {
  weight: "Weights",
  non_trainable: "Non-trainable",
  optimizer_slot: "Optimizer slots",
  other: "Other",
  total: "Total",
};

// Material 700 tones: readable on white, distinct for colour-blind users in pairs.
export const ROLE_COLOR = {
  weight: "#1976d2",
  non_trainable: "#7b1fa2",
  optimizer_slot: "#f57c00",
  other: "#757575",
  total: "#212121",
};

// Where a breakdown comes from when it is PyTorch's (the backend's schema/names.py TORCH_BREAKDOWN_SOURCES):
// a Trainer or Accelerate folder's, a safetensors file's name no framework.
export const TORCH_BREAKDOWN_SOURCES = [
  "pytorch",
  "pytorch checkpoint",
  "safetensors",
  "transformers Trainer checkpoint",
  "Accelerate save_state folder",
  "torch.distributed.checkpoint",
];

// The phases of a training step an op belongs to (the backend's schema/names.py PHASES).
export const PHASES = ["forward", "backward", "optimizer", "loss", "metrics", "input", "executor", "collective"];

// What an op of each phase does: the Phase cell's tooltip.
export const PHASE_HINT = {
  forward: "the model's forward pass",
  backward: "gradients: the backward pass",
  optimizer: "the weight updates",
  loss: "the loss",
  metrics: "metric updates",
  input: "feeding the batch in",
  executor: "the framework's own bookkeeping between ops, and the summaries the step writes",
  collective: "moving tensors between devices: all-reduce, all-gather, reduce-scatter, send/recv",
};

// What a byte in use at the peak is (the backend's peak_by_category keys), in
// stacking order: what stays resident at the bottom, the step's own buffers
// above it, what nobody could attribute on top.
export const CATEGORIES = [
  "weights", "non_trainable", "optimizer_slots", "other_state", "inputs", "activations", "gradients",
  "optimizer_temporaries", "temporaries", "earlier_steps", "held_between_steps", "unattributed",
];

// The categories of the variables, resident between steps (the backend's RESIDENT_CATEGORIES).
export const RESIDENT = ["weights", "non_trainable", "optimizer_slots", "other_state"];

export const CATEGORY_LABEL = {
  weights: "Weights",
  non_trainable: "Non-trainable",
  optimizer_slots: "Optimizer slots",
  other_state: "Other state",
  inputs: "Inputs",
  activations: "Activations",
  gradients: "Gradients",
  optimizer_temporaries: "Optimizer temporaries",
  temporaries: "Temporaries",
  earlier_steps: "From earlier steps",
  held_between_steps: "Held between steps",
  unattributed: "Unattributed",
  moved_state: "Variable (moved buffer)",
  allocator_chunking: "Allocator chunking",
  total: "Peak in use",
  reserved: "Reserved (allocator)",
};

export const CATEGORY_HINT = {
  weights: "trainable variables",
  non_trainable: "BatchNorm statistics and other layer state",
  optimizer_slots: "Adam m/v, momentum, accumulators",
  other_state: "optimizer counters and learning rate, loss scale, metric state",
  inputs: "the batch entering the step",
  activations: "forward outputs kept for the backward pass",
  gradients: "gradients of the weights",
  optimizer_temporaries: "scratch of the weight updates",
  temporaries: "scratch space, loss and metric values",
  earlier_steps: "allocated before the trace by an earlier step, freed during it",
  held_between_steps: "allocated before the trace, in use all through it beyond the variables: the allocator's chunk slack, buffers the runtime keeps",
  unattributed: "in use, but no allocation in the trace names it",
  moved_state: "a variable's buffer that TensorFlow's copy-on-write replaces by a copy, or that copy once it holds the variable: counted with the variables",
  allocator_chunking: "where the asked setting changes the step or the state, the figure is the allocator band's middle: this row is how far that is from the traced chunks scaled (which chunk BFC hands each buffer then, the trace does not say)",
  reserved: "what a CUDA caching allocator holds from the device: the tensors and its cached free blocks, which an out-of-memory error counts too",
};

// The variables' categories share the role colours above.
export const CATEGORY_COLOR = {
  weights: ROLE_COLOR.weight,
  non_trainable: ROLE_COLOR.non_trainable,
  optimizer_slots: ROLE_COLOR.optimizer_slot,
  other_state: ROLE_COLOR.other,
  inputs: "#00838f",
  activations: "#388e3c",
  gradients: "#d32f2f",
  optimizer_temporaries: "#c2185b",
  temporaries: "#8d6e63",
  earlier_steps: "#9575cd",
  held_between_steps: "#78909c",
  unattributed: "#bdbdbd",
  moved_state: "#5c6bc0",
  total: "#212121",
  reserved: "#455a64",
};

// For series that are neither roles nor categories (compute time, save-format modes).
export const OTHER_COLORS = ["#3949ab", "#00897b", "#d81b60", "#8d6e63", "#9e9d24", "#00acc1"];

// Growth: a series that keeps growing, and one that does not.
export const GROWTH_COLOR = { flagged: "#d84315", steady: "#546e7a" };
