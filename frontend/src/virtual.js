// Which rows of a fixed-row-height list are visible: the maths behind the
// virtualised tables (only these rows exist in the DOM).

export function visibleRange({ scrollTop, viewportHeight, rowHeight, rowCount, overscan = 8 }) {
  const totalHeight = rowCount * rowHeight;
  if (rowCount === 0 || rowHeight <= 0) return { start: 0, end: 0, offsetTop: 0, totalHeight };
  const maxScroll = Math.max(0, totalHeight - viewportHeight);
  const top = Math.min(Math.max(0, scrollTop), maxScroll);
  const first = Math.floor(top / rowHeight);
  const last = Math.ceil((top + viewportHeight) / rowHeight);
  const start = Math.max(0, first - overscan);
  const end = Math.min(rowCount, last + overscan);
  return { start, end, offsetTop: start * rowHeight, totalHeight };
}

/** Viewport height: fit small tables entirely, cap large ones. */
export function viewportHeight(rowCount, rowHeight, maxHeight) {
  return Math.min(Math.max(rowCount, 1) * rowHeight, maxHeight);
}

/** The scroll position that shows row `index` whole, moving as little as it can. */
export function scrollToShow({ index, scrollTop, viewportHeight: height, rowHeight }) {
  const top = index * rowHeight;
  if (top < scrollTop) return top;
  if (top + rowHeight > scrollTop + height) return Math.max(0, top + rowHeight - height);
  return scrollTop;
}
