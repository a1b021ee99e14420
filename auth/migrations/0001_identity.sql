-- Auth's own data: users, roles, assignments, the login policy.
CREATE TABLE users (
  user_id         uuid PRIMARY KEY,
  username        text NOT NULL UNIQUE,
  email           text NOT NULL UNIQUE,
  display_name    text NOT NULL,
  status          text NOT NULL CHECK (status IN ('ACTIVE', 'DISABLED')),
  -- Bumped on every change of status or roles.
  authz_version   bigint NOT NULL DEFAULT 1,
  disabled_reason text,
  created_at      timestamptz NOT NULL DEFAULT now(),
  updated_at      timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE roles (
  name        text PRIMARY KEY,
  description text NOT NULL
);
INSERT INTO roles (name, description) VALUES
  ('admin', 'operates the platform'),
  ('problem_setter', 'writes and edits problems'),
  ('judge', 'runs contests'),
  ('contestant', 'takes part in contests');

CREATE TABLE user_roles (
  user_id    uuid NOT NULL REFERENCES users (user_id),
  role       text NOT NULL REFERENCES roles (name),
  granted_by text NOT NULL,
  granted_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (user_id, role)
);

CREATE TABLE login_policy (
  id                       integer PRIMARY KEY CHECK (id = 1),
  min_password_length      integer NOT NULL CHECK (min_password_length BETWEEN 8 AND 128),
  lockout_threshold        integer NOT NULL CHECK (lockout_threshold BETWEEN 1 AND 100),
  mfa_required             boolean NOT NULL,
  session_lifetime_seconds bigint NOT NULL CHECK (session_lifetime_seconds BETWEEN 60 AND 2592000),
  version                  bigint NOT NULL DEFAULT 1,
  updated_by               text NOT NULL DEFAULT 'system',
  updated_at               timestamptz NOT NULL DEFAULT now()
);
INSERT INTO login_policy (id, min_password_length, lockout_threshold, mfa_required,
                          session_lifetime_seconds)
  VALUES (1, 12, 5, false, 43200);
