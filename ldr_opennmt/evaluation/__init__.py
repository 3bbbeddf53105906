"""Per-domain evaluation with sacrebleu."""
