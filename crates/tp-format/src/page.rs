//! Ring-buffer pages as the kernel writes them (layout from `header_page`/`header_event`).
