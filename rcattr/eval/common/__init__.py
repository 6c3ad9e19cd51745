"""What every benchmark shares: the data files, the run folder and its shards, method registries, peak
memory and the accuracy and bootstrap metrics."""
