"""apportion.api."""
