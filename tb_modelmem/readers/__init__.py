"""Files and traces to records, no TensorFlow: the TF2 profiler's XSpace (``xspace``), TF1
RunMetadata (``run_metadata``), TF 2.3-2.10 memory profiles (``memory_profile``), serialized
graphs (``graphdef``, ``graph_info``), checkpoints and model files (``checkpoint``, ``model_file``,
through ``bounded``), and the allocator replay they share (``allocator_replay``). The backend and
``tb-modelmem inspect`` use them with no TensorFlow installed."""
