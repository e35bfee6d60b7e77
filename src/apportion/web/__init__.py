"""apportion.web."""
