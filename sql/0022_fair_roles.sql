-- stepd schema, part 22: admission and claims fair across roles, then users, then workflows.
--
-- A role is workflows.created_role (the writing session_user, set by the database; a sub-workflow
-- copies its parent's, so a whole tree counts as the role that started it). Admission and the
-- role-fair claim walk this index one role at a time (a skip scan), then one user of that role at
-- a time, then that user's workflows, so each costs O(roles + users visited + batch), however
-- many new or running workflows one role has. NULL roles and users (rows the executor wrote with
-- its marker) are one lane each, hence the coalesce.
CREATE INDEX workflows_live_lane_idx
  ON workflows (status, (coalesce(created_role, '')), (coalesce(created_by, '')), id)
  WHERE status IN ('new', 'running');
