-- App's own data: problems, contests and which problems a contest holds.
-- The CHECK constraints repeat the ranges of proto/ulticode/app/v1/app.proto;
-- the service validates first, so they only catch a bug or a hand-made row.
CREATE TABLE problems (
  problem_id      uuid PRIMARY KEY,
  slug            text NOT NULL UNIQUE CHECK (slug ~ '^[a-z][a-z0-9-]{2,63}$'),
  title           text NOT NULL CHECK (char_length(title) BETWEEN 1 AND 200),
  statement       text NOT NULL CHECK (octet_length(statement) <= 65536),
  time_limit_ms   integer NOT NULL CHECK (time_limit_ms BETWEEN 100 AND 60000),
  memory_limit_mb integer NOT NULL CHECK (memory_limit_mb BETWEEN 16 AND 4096),
  difficulty      integer NOT NULL CHECK (difficulty BETWEEN 1 AND 10),
  -- Bumped on every change.
  version         bigint NOT NULL DEFAULT 1,
  created_at      timestamptz NOT NULL DEFAULT now(),
  updated_at      timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE contests (
  contest_id   uuid PRIMARY KEY,
  slug         text NOT NULL UNIQUE CHECK (slug ~ '^[a-z][a-z0-9-]{2,63}$'),
  title        text NOT NULL CHECK (char_length(title) BETWEEN 1 AND 200),
  starts_at    timestamptz NOT NULL,
  ends_at      timestamptz NOT NULL,
  status       text NOT NULL DEFAULT 'DRAFT' CHECK (status IN ('DRAFT', 'PUBLISHED')),
  -- Bumped on every change, including adding, removing and publishing.
  version      bigint NOT NULL DEFAULT 1,
  created_at   timestamptz NOT NULL DEFAULT now(),
  updated_at   timestamptz NOT NULL DEFAULT now(),
  published_at timestamptz,
  CHECK (ends_at > starts_at),
  CHECK ((status = 'PUBLISHED') = (published_at IS NOT NULL))
);

CREATE TABLE contest_problems (
  contest_id uuid NOT NULL REFERENCES contests (contest_id),
  problem_id uuid NOT NULL REFERENCES problems (problem_id),
  label      text NOT NULL CHECK (label ~ '^[A-Z]{1,2}$'),
  PRIMARY KEY (contest_id, problem_id),
  UNIQUE (contest_id, label)
);
-- "Which contests use this problem" without scanning every contest.
CREATE INDEX contest_problems_problem_id ON contest_problems (problem_id);
