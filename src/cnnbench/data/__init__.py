"""Input: synthetic batches (device, host, loader); real data sets arrive with SPEC C6."""
