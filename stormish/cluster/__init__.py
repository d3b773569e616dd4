"""The cluster daemons: nimbus (topologies, scheduling, worker control) and supervisors
(slots, worker processes). Internal: the command line is their interface."""
