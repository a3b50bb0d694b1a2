// Shown when the logdir has no tb_modelmem data: how to write some.

import { el } from "../dom.js";

const SNIPPETS = [
  ["A model and its optimizer, once:", `import tb_modelmem

with tf.summary.create_file_writer("logs/run1").as_default():
    tb_modelmem.summary.variables("variables", model=model,
                                  optimizer=model.optimizer, step=0)`],
  ["While training with Keras (records again when the optimizer changes):",
    `model.fit(x, y, callbacks=[tb_modelmem.MemoryCallback("logs/run1")])`],
  ["Memory over model builds (or steps): what keeps growing, and what holds it:",
    `with tf.summary.create_file_writer("logs/builds").as_default():
    for build in range(8):
        model = make_model()
        ...
        tb_modelmem.summary.memory("memory", step=build)`],
  ["A checkpoint or model file, and what each save format costs to load:",
    `tb-modelmem inspect model.keras --logdir logs/inspect
tb-modelmem loadbench model.keras --logdir logs/load`],
];

export function emptyState() {
  return el("div", { class: "empty", testid: "empty" },
    el("h1", {}, "No model memory data yet"),
    el("p", {}, "This tab shows where a model's memory goes: weights vs optimizer slots vs other state, "
      + "per-op memory and time, what keeps growing over steps or model builds, and the cost of loading each save format. "
      + "Write some data into the logdir:"),
    SNIPPETS.map(([text, code]) => [el("p", {}, text), el("pre", {}, code)]),
    el("p", { class: "hint" }, "Old log dirs with RunMetadata (FileWriter.add_run_metadata, tf.summary.trace_export) "
      + "and TF2 profiler sessions (<run>/plugins/profile/) show up under Ops without any change. "
      + "The tab refreshes by itself every 20 seconds."));
}
