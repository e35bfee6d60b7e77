"""apportion.store."""
