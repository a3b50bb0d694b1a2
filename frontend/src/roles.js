// One colour and label per role, so every chart and card agrees.

export const ROLES = ["weight", "non_trainable", "optimizer_slot", "other"];

export const ROLE_LABEL = {
  weight: "Weights",
  non_trainable: "Non-trainable",
  optimizer_slot: "Optimizer slots",
  other: "Other",
  activations: "Activations / temporaries",
  unattributed: "Unattributed",
  total: "Total",
};

// Material 700 tones: readable on white, distinct for colour-blind users in pairs.
export const ROLE_COLOR = {
  weight: "#1976d2",
  non_trainable: "#7b1fa2",
  optimizer_slot: "#f57c00",
  other: "#757575",
  activations: "#388e3c",
  unattributed: "#bdbdbd",
  total: "#212121",
};

export const PEAK_ROLES = ["weight", "optimizer_slot", "activations", "unattributed"];

// For series that are not roles (compute time, save-format modes): hues no role uses.
export const OTHER_COLORS = ["#3949ab", "#00897b", "#d81b60", "#8d6e63", "#9e9d24", "#00acc1"];
