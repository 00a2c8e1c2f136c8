"""Where a live session's rigid-body frames come from: OptiTrack NatNet, Qualisys RT, a replayed
capture file, each a :class:`~rbmcap.live.sources.base.Source`, opened from an address such as
``natnet://HOST`` by :func:`~rbmcap.live.sources.address.open_source`."""
