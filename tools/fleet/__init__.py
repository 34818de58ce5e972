"""The local fleet that ``rtaudit up`` runs: the embedded broker (:mod:`~rtaudit.tools.fleet.broker`),
worker processes under supervision (:mod:`~rtaudit.tools.fleet.local`,
:mod:`~rtaudit.tools.fleet.supervision`, :mod:`~rtaudit.tools.fleet.children`), the record of a
running fleet (:mod:`~rtaudit.tools.fleet.record`) and the control records lost with a broker
restart (:mod:`~rtaudit.tools.fleet.control_watch`)."""
