"""The CPython worker's parts: trainers over the C kernels, local training data and
the job's model read before joining (``model_fetch``)."""
