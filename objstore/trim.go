package objstore

// DropCaches empties the store's text caches (the fulltext cache and the
// latest texts of recently written files) and returns the bytes they
// were charged. Nothing is lost: a later read or put rebuilds what it
// needs from the segments. A long-running owner (the mount) calls it when
// it has been idle a while, so that an idle process does not keep up to
// CacheBytes+LatestBytes of texts no one may ask for again.
func (s *Store) DropCaches() int64 {
	return s.cache.clear() + s.latest.clear()
}

// CacheUses counts the lookups and insertions of the store's text caches
// since Open: an owner that sees it unchanged for a while knows the store
// has been neither read nor written meanwhile.
func (s *Store) CacheUses() uint64 {
	return s.cache.uses.Load() + s.latest.uses.Load()
}
