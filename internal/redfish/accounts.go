package redfish

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"go.uber.org/zap"

	"github.com/bmlab/bmlab/internal/accounts"
)

// The AccountService (DSP0266 §13, Redfish AccountService and
// ManagerAccount schemas) over the shared account store. The bootstrap
// administrator and machines' own users show as accounts that cannot be
// changed here (they come from vbmcd's flags and the machines' settings).

const rolesURI = accountServiceURI + "/Roles"

func roleNames() []string {
	out := make([]string, len(accounts.Roles))
	for i, r := range accounts.Roles {
		out[i] = string(r)
	}
	return out
}

func roleCollection() obj {
	members := make([]string, len(accounts.Roles))
	for i, r := range accounts.Roles {
		members[i] = rolesURI + "/" + string(r)
	}
	return collection(rolesURI, "RoleCollection", "Roles Collection", members)
}

func getRole(s *Server, c *call) *apiError {
	r := accounts.Role(c.params[0])
	if !r.Valid() {
		return newError(http.StatusNotFound, MsgResourceNotFound, "Role", c.params[0])
	}
	s.writeJSON(c, http.StatusOK, role(r))
	return nil
}

func role(r accounts.Role) obj {
	return obj{
		"@odata.id":          rolesURI + "/" + string(r),
		"@odata.type":        "#Role.v1_3_1.Role",
		"Id":                 string(r),
		"Name":               string(r) + " Role",
		"RoleId":             string(r),
		"IsPredefined":       true,
		"AssignedPrivileges": r.AssignedPrivileges(),
		"OemPrivileges":      []string{},
	}
}

func (s *Server) policy() accounts.Policy {
	if s.accounts == nil {
		return accounts.Policy{}
	}
	return s.accounts.Policy()
}

func getAccountService(s *Server, c *call) *apiError {
	s.writeJSON(c, http.StatusOK, accountService(s.policy()))
	return nil
}

func accountService(p accounts.Policy) obj {
	secs := int(p.Duration / time.Second)
	return obj{
		"@odata.id":                       accountServiceURI,
		"@odata.type":                     "#AccountService.v1_13_0.AccountService",
		"Id":                              "AccountService",
		"Name":                            "Account Service",
		"ServiceEnabled":                  true,
		"AuthFailureLoggingThreshold":     0,
		"MinPasswordLength":               accounts.MinPasswordLength,
		"MaxPasswordLength":               accounts.MaxPasswordLength,
		"AccountLockoutThreshold":         p.Threshold,
		"AccountLockoutDuration":          secs,
		"AccountLockoutCounterResetAfter": secs,
		"LocalAccountAuth":                "Enabled",
		"Accounts":                        ref{accountsURI},
		"Roles":                           ref{rolesURI},
		"Status":                          status("Enabled"),
	}
}

var accountServiceSchema = fields{
	"AccountLockoutThreshold": {kind: kindInt},
	"AccountLockoutDuration":  {kind: kindInt},
}

// Bounds of the lockout policy's properties.
const (
	maxLockoutThreshold = 1000
	maxLockoutSeconds   = 30 * 24 * 3600
)

// serviceWide refuses a change of service-wide settings (the lockout
// policy, the event retry settings) to an account bound to a system: its
// Administrator role is over its own system, not over everyone's logins
// (issue 25).
func serviceWide(c *call) *apiError {
	if c.who.all {
		return nil
	}
	return newError(http.StatusForbidden, MsgInsufficientPrivilege).
		with("An account bound to a system may not change service-wide settings; use an account that is not bound to one.")
}

func patchAccountService(s *Server, c *call) *apiError {
	if s.accounts == nil {
		return newError(http.StatusMethodNotAllowed, MsgOperationNotAllowed).with("vbmcd runs without an account store (no state directory).")
	}
	if err := ifMatch(c, renderJSON(0, accountService(s.policy())).etag); err != nil {
		return err
	}
	if err := serviceWide(c); err != nil {
		return err
	}
	body, err := readChecked(c, accountServiceSchema)
	if err != nil {
		return err
	}
	p := s.accounts.Policy()
	// Bounded before the conversion: 1e10 seconds overflowed
	// time.Duration into a negative lockout and a 500 (issue 25).
	if v, ok := body["AccountLockoutThreshold"].(float64); ok {
		if v > maxLockoutThreshold {
			return newError(http.StatusBadRequest, MsgPropertyValueOutOfRange, argText(v), "AccountLockoutThreshold").
				with(fmt.Sprintf("From 0 (never lock) to %d.", maxLockoutThreshold))
		}
		p.Threshold = int(v)
	}
	if v, ok := body["AccountLockoutDuration"].(float64); ok {
		if v > maxLockoutSeconds {
			return newError(http.StatusBadRequest, MsgPropertyValueOutOfRange, argText(v), "AccountLockoutDuration").
				with(fmt.Sprintf("From 0 to %d seconds (30 days).", maxLockoutSeconds))
		}
		p.Duration = time.Duration(v) * time.Second
	}
	if e := s.accounts.SetPolicy(p); e != nil {
		return newError(http.StatusInternalServerError, MsgInternalError).with(e.Error())
	}
	s.logChange(c, "lockout policy changed", zap.Int("threshold", p.Threshold), zap.Duration("duration", p.Duration))
	return getAccountService(s, c)
}

// readPatch checks a PATCH of the resource rendered as cur: If-Match against
// its ETag, then the body against schema (a property cur has that schema
// lacks is PropertyNotWritable).
func readPatch(c *call, schema fields, cur obj) (map[string]any, *apiError) {
	if err := ifMatch(c, renderJSON(0, cur).etag); err != nil {
		return nil, err
	}
	return checkBody(c, schema, cur)
}

// readChecked reads a request body and checks it against schema.
func readChecked(c *call, schema fields) (map[string]any, *apiError) {
	return checkBody(c, schema, nil)
}

func checkBody(c *call, schema fields, cur obj) (map[string]any, *apiError) {
	body, err := readObject(c)
	if err != nil {
		return nil, err
	}
	if msgs := schema.check(body, cur); len(msgs) > 0 {
		return nil, &apiError{status: http.StatusBadRequest, messages: msgs}
	}
	if c.r.Method == http.MethodPatch {
		if err := schema.noChange(body); err != nil {
			return nil, err
		}
	}
	return body, nil
}

func accountURI(id string) string { return accountsURI + "/" + url.PathEscape(id) }

func accountResource(id, user string, role accounts.Role, enabled, locked bool, system string) obj {
	o := obj{
		"@odata.id":    accountURI(id),
		"@odata.type":  "#ManagerAccount.v1_10_0.ManagerAccount",
		"Id":           id,
		"Name":         "User Account",
		"UserName":     user,
		"RoleId":       string(role),
		"Enabled":      enabled,
		"Locked":       locked,
		"Password":     nil,
		"AccountTypes": []string{"Redfish", "IPMI"},
		"Links":        obj{"Role": ref{rolesURI + "/" + string(role)}},
	}
	if system != "" {
		o["Oem"] = obj{"Bmlab": obj{"System": system}}
	}
	return o
}

// manages reports whether who may manage account a: global administrators
// every account, a system's administrators the accounts of that system;
// on a server's own BMC, the accounts bound to that server only.
func (p *principal) manages(a accounts.Account) bool {
	if p.priv&accounts.ConfigureUsers == 0 {
		return false
	}
	if p.only != "" && a.System != p.only {
		return false
	}
	if p.acct == "" {
		return p.all
	}
	return p.system == "" || p.system == a.System
}

// accountView is account a as the BMC the request came in through shows
// it. At a server's own BMC its Id is its IPMI user ID, as on a real BMC,
// and its binding (the BMC's own system) is not shown: the store's ids are
// counted across every BMC, and would tell one BMC how many accounts the
// others made (issue 46). The service's listener shows the store's ids.
func accountView(c *call, a accounts.Account) obj {
	if c.bmc != "" {
		return accountResource(strconv.Itoa(int(a.Slot)), a.UserName, a.Role, a.Enabled, a.Locked, "")
	}
	return accountResource(a.ID, a.UserName, a.Role, a.Enabled, a.Locked, a.System)
}

// accountIDAt is a's Id as the BMC the request came in through shows it.
func accountIDAt(c *call, a accounts.Account) string {
	if c.bmc != "" {
		return strconv.Itoa(int(a.Slot))
	}
	return a.ID
}

// builtin is the account of a principal not in the store (the bootstrap
// administrator, a machine's own user); its ID is the user name.
func builtin(p *principal) obj {
	return accountResource(p.user, p.user, accounts.Administrator, true, false, "")
}

func getAccounts(s *Server, c *call) *apiError {
	var members []string
	if c.who.acct == "" {
		members = append(members, accountURI(c.who.user))
	}
	if s.accounts != nil {
		for _, a := range s.accounts.List("") {
			if a.ID == c.who.acct || c.who.manages(a) {
				members = append(members, accountURI(accountIDAt(c, a)))
			}
		}
	}
	s.writeJSON(c, http.StatusOK, collection(accountsURI, "ManagerAccountCollection", "Accounts Collection", members))
	return nil
}

// account finds c.params[0] among the accounts c.who may see.
func (s *Server) account(c *call) (accounts.Account, bool, *apiError) {
	id := c.params[0]
	if c.who.acct == "" && id == c.who.user {
		return accounts.Account{}, true, nil
	}
	if s.accounts != nil {
		a, err := s.accounts.Get(id)
		if c.bmc != "" {
			// At a server's own BMC an account is named by its IPMI
			// user ID (accountView).
			err = accounts.ErrNotFound
			if slot, perr := strconv.ParseUint(id, 10, 8); perr == nil {
				if found, ok := s.accounts.BySlot(c.bmc, uint8(slot)); ok && strconv.Itoa(int(found.Slot)) == id {
					a, err = found, nil
				}
			}
		}
		if err == nil && (a.ID == c.who.acct || c.who.manages(a)) {
			return a, false, nil
		}
	}
	return accounts.Account{}, false, newError(http.StatusNotFound, MsgResourceNotFound, "ManagerAccount", id)
}

func getAccount(s *Server, c *call) *apiError {
	a, self, err := s.account(c)
	if err != nil {
		return err
	}
	if self {
		s.writeJSON(c, http.StatusOK, builtin(c.who))
		return nil
	}
	s.writeJSON(c, http.StatusOK, accountView(c, a))
	return nil
}

var accountCreateSchema = fields{
	"UserName": {kind: kindString},
	"Password": {kind: kindString},
	"RoleId":   {enum: roleNames()},
	"Enabled":  {kind: kindBool},
	"Oem":      {sub: fields{"Bmlab": {sub: fields{"System": {kind: kindString}}}}},
}

var accountPatchSchema = fields{
	"UserName": {kind: kindString},
	"Password": {kind: kindString},
	"RoleId":   {enum: roleNames()},
	"Enabled":  {kind: kindBool},
	"Locked":   {kind: kindBool},
}

// storeError turns an account store error into a Redfish error.
func storeError(err error, in obj) *apiError {
	var ie *accounts.InvalidError
	switch {
	case errors.Is(err, accounts.ErrExists):
		return newError(http.StatusConflict, MsgResourceInUse).with(err.Error())
	case errors.As(err, &ie):
		// The property the store refused, named as the request named
		// it: a 17-byte UserName was reported as a bad Password.
		prop, shown := accountProps[ie.Field], "(hidden)"
		if v, ok := in[prop].(string); ok && prop != "Password" {
			shown = truncate(v, maxArgText)
		}
		if ie.TooLong {
			return newError(http.StatusBadRequest, MsgStringValueTooLong, shown, strconv.Itoa(ie.Max)).with(err.Error())
		}
		return newError(http.StatusBadRequest, MsgPropertyValueFormatError, shown, prop).with(err.Error())
	case errors.Is(err, accounts.ErrFull):
		return newError(http.StatusBadRequest, MsgInsufficientStorage).with(err.Error())
	case errors.Is(err, accounts.ErrNotFound):
		return newError(http.StatusNotFound, MsgResourceNotFound, "ManagerAccount", "")
	}
	return newError(http.StatusInternalServerError, MsgInternalError).with(err.Error())
}

// accountProps names the account store's fields as ManagerAccount does.
var accountProps = map[string]string{
	accounts.FieldName: "UserName", accounts.FieldPassword: "Password",
	accounts.FieldRole: "RoleId", accounts.FieldSlot: "IPMI user ID",
}

func postAccount(s *Server, c *call) *apiError {
	if s.accounts == nil {
		return newError(http.StatusMethodNotAllowed, MsgOperationNotAllowed).with("vbmcd runs without an account store (no state directory).")
	}
	body, err := readChecked(c, accountCreateSchema)
	if err != nil {
		return err
	}
	for _, k := range []string{"UserName", "Password", "RoleId"} {
		if _, ok := body[k]; !ok {
			return newError(http.StatusBadRequest, MsgPropertyMissing, k)
		}
	}
	n := accounts.New{
		UserName: body["UserName"].(string),
		Password: body["Password"].(string),
		Role:     accounts.Role(body["RoleId"].(string)),
		Enabled:  true,
	}
	if v, ok := body["Enabled"].(bool); ok {
		n.Enabled = v
	}
	if oem, ok := body["Oem"].(map[string]any); ok {
		if b, ok := oem["Bmlab"].(map[string]any); ok {
			n.System, _ = b["System"].(string)
		}
	}
	if n.System != "" {
		m, e := s.svc.Get(n.System)
		if e != nil {
			return newError(http.StatusBadRequest, MsgPropertyValueNotInList, n.System, "Oem/Bmlab/System").with("No such system.")
		}
		n.System = m.ID
	}
	switch {
	case c.who.only != "" && (c.who.all || c.who.system == c.who.only):
		// An account made on a server's own BMC is that server's, as a
		// user made on its IPMI BMC is.
		if n.System != "" && n.System != c.who.only {
			return newError(http.StatusForbidden, MsgInsufficientPrivilege).with("This BMC manages the accounts of its own system only.")
		}
		n.System = c.who.only
	case c.who.acct != "" && c.who.system != "":
		// A system's administrator makes accounts of that system only.
		if n.System != "" && n.System != c.who.system {
			return newError(http.StatusForbidden, MsgInsufficientPrivilege).with("A system's account manages the accounts of its own system only.")
		}
		n.System = c.who.system
	case !c.who.all:
		return newError(http.StatusForbidden, MsgInsufficientPrivilege)
	}
	a, e := s.accounts.Create(n)
	if e != nil {
		return storeError(e, body)
	}
	s.logChange(c, "account created", zap.String("account", a.UserName), zap.String("role", string(a.Role)), zap.String("system", a.System))
	c.w.Header().Set("Location", accountURI(accountIDAt(c, a)))
	s.writeJSON(c, http.StatusCreated, accountView(c, a))
	return nil
}

var errBuiltin = newError(http.StatusMethodNotAllowed, MsgOperationNotAllowed).
	with("This account is set by vbmcd's --username/--credentials-file or the machine's settings, not here.")

func patchAccount(s *Server, c *call) *apiError {
	a, self, err := s.account(c)
	if err != nil {
		return err
	}
	if self {
		if err := ifMatch(c, renderJSON(0, builtin(c.who)).etag); err != nil {
			return err
		}
		return errBuiltin
	}
	if err := ifMatch(c, renderJSON(0, accountView(c, a)).etag); err != nil {
		return err
	}
	body, err := readChecked(c, accountPatchSchema)
	if err != nil {
		return err
	}
	if len(body) == 0 {
		return newError(http.StatusBadRequest, MsgEmptyJSON)
	}
	var ch accounts.Change
	for k, v := range body {
		switch k {
		case "Password":
			p := v.(string)
			ch.Password = &p
		case "UserName":
			u := v.(string)
			ch.UserName = &u
		case "RoleId":
			r := accounts.Role(v.(string))
			ch.Role = &r
		case "Enabled":
			e := v.(bool)
			ch.Enabled = &e
		case "Locked":
			if v.(bool) {
				return newError(http.StatusBadRequest, MsgPropertyValueNotInList, "true", "Locked").with("An account is locked by failed logins only; PATCH Locked to false to unlock it.")
			}
			ch.Unlock = true
		}
	}
	// ConfigureSelf changes one's own password; the rest needs ConfigureUsers.
	onlyPassword := ch.UserName == nil && ch.Role == nil && ch.Enabled == nil && !ch.Unlock
	if !c.who.manages(a) && !(a.ID == c.who.acct && onlyPassword) {
		return newError(http.StatusForbidden, MsgInsufficientPrivilege).with("Changing this account needs the ConfigureUsers privilege.")
	}
	a, e := s.accounts.Update(a.ID, ch)
	if e != nil {
		return storeError(e, body)
	}
	s.logChange(c, "account changed", zap.String("account", a.UserName))
	s.writeJSON(c, http.StatusOK, accountView(c, a))
	return nil
}

func deleteAccount(s *Server, c *call) *apiError {
	a, self, err := s.account(c)
	if err != nil {
		return err
	}
	if self {
		return errBuiltin
	}
	if !c.who.manages(a) {
		return newError(http.StatusForbidden, MsgInsufficientPrivilege).with("Deleting an account needs the ConfigureUsers privilege.")
	}
	if e := s.accounts.Delete(a.ID); e != nil {
		return storeError(e, nil)
	}
	s.logChange(c, "account deleted", zap.String("account", a.UserName))
	c.w.WriteHeader(http.StatusNoContent)
	return nil
}
