-- The SQLite schema a database had before app/db existed (commit 958523b): Alembic revisions
-- 0001 + 0002 of app/web/migrations, plus the tables monitor/store.py (mon_*) and
-- topology/capabilities.py (cap_nodes) created with create_all. Dumped from sqlite_master;
-- tests/unit/db/test_legacy_upgrade.py upgrades a database built from it.

CREATE TABLE alembic_version (
	version_num VARCHAR(32) NOT NULL, 
	CONSTRAINT alembic_version_pkc PRIMARY KEY (version_num)
);
CREATE TABLE admission_lock (
	id INTEGER NOT NULL, 
	counter INTEGER NOT NULL, 
	PRIMARY KEY (id)
);
CREATE TABLE events (
	id INTEGER NOT NULL, 
	ts FLOAT NOT NULL, 
	kind VARCHAR(64) NOT NULL, 
	severity VARCHAR(16) NOT NULL, 
	message TEXT NOT NULL, 
	detail JSON NOT NULL, 
	PRIMARY KEY (id)
);
CREATE INDEX ix_events_ts ON events (ts);
CREATE TABLE topology_snapshots (
	id INTEGER NOT NULL, 
	ts FLOAT NOT NULL, 
	graph JSON NOT NULL, 
	PRIMARY KEY (id)
);
CREATE INDEX ix_topology_snapshots_ts ON topology_snapshots (ts);
CREATE TABLE users (
	id INTEGER NOT NULL, 
	name VARCHAR(64) NOT NULL, 
	password_hash VARCHAR(256), 
	is_admin BOOLEAN NOT NULL, 
	created_at FLOAT NOT NULL, 
	PRIMARY KEY (id), 
	UNIQUE (name)
);
CREATE TABLE api_tokens (
	id INTEGER NOT NULL, 
	user_id INTEGER NOT NULL, 
	token_hash VARCHAR(64) NOT NULL, 
	label VARCHAR(64) NOT NULL, 
	created_at FLOAT NOT NULL, 
	PRIMARY KEY (id), 
	FOREIGN KEY(user_id) REFERENCES users (id) ON DELETE CASCADE, 
	UNIQUE (token_hash)
);
CREATE INDEX ix_api_tokens_user_id ON api_tokens (user_id);
CREATE TABLE audit_log (
	id INTEGER NOT NULL, 
	ts FLOAT NOT NULL, 
	user_id INTEGER, 
	action VARCHAR(32) NOT NULL, 
	entity VARCHAR(32) NOT NULL, 
	entity_id INTEGER, 
	detail JSON NOT NULL, 
	PRIMARY KEY (id), 
	FOREIGN KEY(user_id) REFERENCES users (id)
);
CREATE INDEX ix_audit_log_ts ON audit_log (ts);
CREATE TABLE reservations (
	id INTEGER NOT NULL, 
	name VARCHAR(128) NOT NULL, 
	description TEXT NOT NULL, 
	src VARCHAR(64) NOT NULL, 
	src_vlan INTEGER, 
	dst VARCHAR(64) NOT NULL, 
	dst_vlan INTEGER, 
	bandwidth FLOAT NOT NULL, 
	start_ts FLOAT NOT NULL, 
	end_ts FLOAT NOT NULL, 
	mode VARCHAR(16) NOT NULL, 
	state VARCHAR(16) NOT NULL, 
	state_reason TEXT NOT NULL, 
	ero JSON, 
	path JSON, 
	owner_id INTEGER NOT NULL, 
	hold_expires_ts FLOAT, 
	created_ts FLOAT NOT NULL, 
	updated_ts FLOAT NOT NULL, 
	PRIMARY KEY (id), 
	FOREIGN KEY(owner_id) REFERENCES users (id)
);
CREATE INDEX ix_reservations_owner_id ON reservations (owner_id);
CREATE INDEX ix_reservations_state ON reservations (state);
CREATE INDEX ix_reservations_window ON reservations (start_ts, end_ts);
CREATE TABLE circuits (
	id INTEGER NOT NULL, 
	reservation_id INTEGER, 
	name VARCHAR(128) NOT NULL, 
	a_end VARCHAR(64) NOT NULL, 
	z_end VARCHAR(64) NOT NULL, 
	capacity FLOAT NOT NULL, 
	state VARCHAR(16) NOT NULL, 
	created_ts FLOAT NOT NULL, 
	updated_ts FLOAT NOT NULL, 
	PRIMARY KEY (id), 
	FOREIGN KEY(reservation_id) REFERENCES reservations (id)
);
CREATE INDEX ix_circuits_reservation_id ON circuits (reservation_id);
CREATE TABLE xcons (
	id INTEGER NOT NULL, 
	circuit_id INTEGER NOT NULL, 
	ots VARCHAR(64) NOT NULL, 
	in_port INTEGER NOT NULL, 
	out_port INTEGER NOT NULL, 
	active BOOLEAN NOT NULL, 
	PRIMARY KEY (id), 
	FOREIGN KEY(circuit_id) REFERENCES circuits (id) ON DELETE CASCADE
);
CREATE INDEX ix_xcons_circuit_id ON xcons (circuit_id);
CREATE TABLE mon_samples (
	id INTEGER NOT NULL, 
	t FLOAT NOT NULL, 
	point VARCHAR(128) NOT NULL, 
	metric VARCHAR(64) NOT NULL, 
	value FLOAT NOT NULL, 
	PRIMARY KEY (id)
);
CREATE INDEX ix_mon_samples_t ON mon_samples (t);
CREATE INDEX ix_mon_samples_point_metric_t ON mon_samples (point, metric, t);
CREATE TABLE mon_events (
	id INTEGER NOT NULL, 
	t FLOAT NOT NULL, 
	circuit VARCHAR(128) NOT NULL, 
	kind VARCHAR(64) NOT NULL, 
	flows TEXT NOT NULL, 
	detail TEXT NOT NULL, 
	PRIMARY KEY (id)
);
CREATE INDEX ix_mon_events_t ON mon_events (t);
CREATE INDEX ix_mon_events_circuit ON mon_events (circuit);
CREATE INDEX ix_mon_events_kind ON mon_events (kind);
CREATE TABLE cap_nodes (
	dpid VARCHAR(16) NOT NULL, 
	name VARCHAR(64), 
	switch_type VARCHAR(16) NOT NULL, 
	switching_time FLOAT NOT NULL, 
	one_rule_per_port BOOLEAN NOT NULL, 
	flow_table_capacity INTEGER, 
	vlan_restrictions JSON, 
	match_fields JSON, 
	granularity JSON NOT NULL, 
	setup_time_min FLOAT, 
	setup_time_max FLOAT, 
	updated_at FLOAT NOT NULL, 
	PRIMARY KEY (dpid)
);
INSERT INTO alembic_version (version_num) VALUES ('0002');
INSERT INTO admission_lock (id, counter) VALUES (1, 0);
