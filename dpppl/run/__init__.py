"""The one run path: the driver behind [`dpppl.sample`][dpppl.sample], the chunked runner whose steps
are compiled once per process, the NUTS backend and the InferenceData output."""
