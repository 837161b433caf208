package redfish

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// The Base message registry this service speaks (DMTF Base.1.16.0). Only the
// messages the service emits are listed; their texts are the registry's.
const (
	baseRegistryPrefix  = "Base"
	baseRegistryVersion = "1.16.0"
	baseRegistryID      = baseRegistryPrefix + "." + baseRegistryVersion
)

// message is one entry of a message registry.
type message struct {
	Text       string // with %1, %2 ... placeholders
	Severity   string // OK, Warning, Critical
	Resolution string
	NumArgs    int
}

// MessageID names a Base registry message.
type MessageID string

// Base registry messages used by this service.
const (
	MsgSuccess                         MessageID = "Success"
	MsgGeneralError                    MessageID = "GeneralError"
	MsgCreated                         MessageID = "Created"
	MsgMalformedJSON                   MessageID = "MalformedJSON"
	MsgEmptyJSON                       MessageID = "EmptyJSON"
	MsgUnrecognizedRequestBody         MessageID = "UnrecognizedRequestBody"
	MsgPropertyUnknown                 MessageID = "PropertyUnknown"
	MsgPropertyNotWritable             MessageID = "PropertyNotWritable"
	MsgPropertyMissing                 MessageID = "PropertyMissing"
	MsgPropertyValueTypeError          MessageID = "PropertyValueTypeError"
	MsgPropertyValueNotInList          MessageID = "PropertyValueNotInList"
	MsgPropertyValueOutOfRange         MessageID = "PropertyValueOutOfRange"
	MsgPropertyValueConflict           MessageID = "PropertyValueConflict"
	MsgActionNotSupported              MessageID = "ActionNotSupported"
	MsgActionParameterMissing          MessageID = "ActionParameterMissing"
	MsgActionParameterUnknown          MessageID = "ActionParameterUnknown"
	MsgActionParameterValueTypeError   MessageID = "ActionParameterValueTypeError"
	MsgActionParameterValueNotInList   MessageID = "ActionParameterValueNotInList"
	MsgActionParameterNotSupported     MessageID = "ActionParameterNotSupported"
	MsgResourceNotFound                MessageID = "ResourceNotFound"
	MsgResourceInUse                   MessageID = "ResourceInUse"
	MsgResourceInStandby               MessageID = "ResourceInStandby"
	MsgNoValidSession                  MessageID = "NoValidSession"
	MsgInsufficientPrivilege           MessageID = "InsufficientPrivilege"
	MsgSessionLimitExceeded            MessageID = "SessionLimitExceeded"
	MsgSessionTerminated               MessageID = "SessionTerminated"
	MsgOperationNotAllowed             MessageID = "OperationNotAllowed"
	MsgHeaderInvalid                   MessageID = "HeaderInvalid"
	MsgPreconditionFailed              MessageID = "PreconditionFailed"
	MsgPayloadTooLarge                 MessageID = "PayloadTooLarge"
	MsgInternalError                   MessageID = "InternalError"
	MsgServiceTemporarilyUnavailable   MessageID = "ServiceTemporarilyUnavailable"
	MsgResourceMissingAtURI            MessageID = "ResourceMissingAtURI"
	MsgCouldNotEstablishConnection     MessageID = "CouldNotEstablishConnection"
	MsgResourceAtURIUnauthorized       MessageID = "ResourceAtUriUnauthorized"
	MsgActionParameterValueFormatError MessageID = "ActionParameterValueFormatError"
	MsgPropertyValueFormatError        MessageID = "PropertyValueFormatError"
	MsgInsufficientStorage             MessageID = "InsufficientStorage"
	MsgOperationFailed                 MessageID = "OperationFailed"
	MsgQueryParameterUnsupported       MessageID = "QueryParameterUnsupported"
	MsgQueryParameterValueTypeError    MessageID = "QueryParameterValueTypeError"
	MsgMaximumErrorsExceeded           MessageID = "MaximumErrorsExceeded"
	MsgPropertyDuplicate               MessageID = "PropertyDuplicate"
	MsgActionParameterDuplicate        MessageID = "ActionParameterDuplicate"
	MsgNoOperation                     MessageID = "NoOperation"
	MsgStringValueTooLong              MessageID = "StringValueTooLong"
	MsgAccessDenied                    MessageID = "AccessDenied"
	MsgCreateLimitReachedForResource   MessageID = "CreateLimitReachedForResource"
)

var baseMessages = map[MessageID]message{
	MsgSuccess:      {"The request completed successfully.", "OK", "None", 0},
	MsgGeneralError: {"A general error has occurred.  See Resolution for information on how to resolve the error, or @Message.ExtendedInfo if Resolution is not provided.", "Critical", "None.", 0},
	MsgCreated:      {"The resource has been created successfully.", "OK", "None.", 0},
	MsgMalformedJSON: {"The request body submitted was malformed JSON and could not be parsed by the receiving service.", "Critical",
		"Ensure that the request body is valid JSON and resubmit the request.", 0},
	MsgEmptyJSON: {"The request body submitted contained an empty JSON object and the service is unable to process it.", "Warning",
		"Add properties in the JSON object and resubmit the request.", 0},
	MsgUnrecognizedRequestBody: {"The service detected a malformed request body that it was unable to interpret.", "Warning",
		"Correct the request body and resubmit the request if it failed.", 0},
	MsgPropertyUnknown: {"The property %1 is not in the list of valid properties for the resource.", "Warning",
		"Remove the unknown property from the request body and resubmit the request if the operation failed.", 1},
	MsgPropertyNotWritable: {"The property %1 is a read only property and cannot be assigned a value.", "Warning",
		"Remove the property from the request body and resubmit the request if the operation failed.", 1},
	MsgPropertyMissing: {"The property %1 is a required property and must be included in the request.", "Warning",
		"Ensure that the property is in the request body and has a valid value and resubmit the request if the operation failed.", 1},
	MsgPropertyValueTypeError: {"The value '%1' for the property %2 is of a different type than the property can accept.", "Warning",
		"Correct the value for the property in the request body and resubmit the request if the operation failed.", 2},
	MsgPropertyValueNotInList: {"The value '%1' for the property %2 is not in the list of acceptable values.", "Warning",
		"Choose a value from the enumeration list that the implementation can support and resubmit the request if the operation failed.", 2},
	MsgPropertyValueOutOfRange: {"The value '%1' for the property %2 is not in the supported range of acceptable values.", "Warning",
		"Correct the value for the property in the request body and resubmit the request if the operation failed.", 2},
	MsgPropertyValueConflict: {"The property '%1' could not be written because its value would conflict with the value of the '%2' property.", "Warning",
		"No resolution is required.", 2},
	MsgActionNotSupported: {"The action %1 is not supported by the resource.", "Critical",
		"The action supplied cannot be resubmitted to the implementation.  Perhaps the action was invalid, the wrong resource was the target or the implementation documentation may be of assistance.", 1},
	MsgActionParameterMissing: {"The action %1 requires the parameter %2 to be present in the request body.", "Critical",
		"Supply the action with the required parameter in the request body when the request is resubmitted.", 2},
	MsgActionParameterUnknown: {"The action %1 was submitted with the invalid parameter %2.", "Warning",
		"Correct the invalid action parameter and resubmit the request if the operation failed.", 2},
	MsgActionParameterValueTypeError: {"The value '%1' for the parameter %2 in the action %3 is of a different type than the parameter can accept.", "Warning",
		"Correct the value for the parameter in the request body and resubmit the request if the operation failed.", 3},
	MsgActionParameterValueNotInList: {"The value '%1' for the parameter %2 in the action %3 is not in the list of acceptable values.", "Warning",
		"Choose a value from the enumeration list that the implementation can support and resubmit the request if the operation failed.", 3},
	MsgResourceNotFound: {"The requested resource of type %1 named '%2' was not found.", "Critical",
		"Provide a valid resource identifier and resubmit the request.", 2},
	MsgResourceInUse: {"The change to the requested resource failed because the resource is in use or in transition.", "Warning",
		"Remove the condition and resubmit the request if the operation failed.", 0},
	MsgResourceInStandby: {"The request could not be performed because the resource is in standby.", "Critical",
		"Ensure that the resource is in the correct power state and resubmit the request.", 0},
	MsgNoValidSession: {"There is no valid session established with the implementation.", "Critical",
		"Establish a session before attempting any operations.", 0},
	MsgInsufficientPrivilege: {"There are insufficient privileges for the account or credentials associated with the current session to perform the requested operation.", "Critical",
		"Either abandon the operation or change the associated access rights and resubmit the request if the operation failed.", 0},
	MsgSessionLimitExceeded: {"The session establishment failed due to the number of simultaneous sessions exceeding the limit of the implementation.", "Critical",
		"Reduce the number of other sessions before trying to establish the session or increase the limit of simultaneous sessions, if supported.", 0},
	MsgSessionTerminated:   {"The session was successfully terminated.", "OK", "No resolution is required.", 0},
	MsgOperationNotAllowed: {"The HTTP method is not allowed on this resource.", "Critical", "None.", 0},
	MsgHeaderInvalid: {"Header '%1' is invalid.", "Critical",
		"Resubmit the request with a valid request header.", 1},
	MsgPreconditionFailed: {"The ETag supplied did not match the ETag required to change this resource.", "Critical",
		"Try the operation again using the appropriate ETag.", 0},
	MsgPayloadTooLarge: {"The supplied payload exceeds the maximum size supported by the service.", "Critical",
		"Check that the supplied payload is correct and supported by this service.", 0},
	MsgInternalError: {"The request failed due to an internal service error.  The service is still operational.", "Critical",
		"Resubmit the request.  If the problem persists, consider resetting the service.", 0},
	MsgServiceTemporarilyUnavailable: {"The service is temporarily unavailable.  Retry in %1 seconds.", "Critical",
		"Wait for the indicated retry duration and retry the operation.", 1},
	MsgResourceMissingAtURI: {"The resource at the URI '%1' was not found.", "Critical",
		"Place a valid resource at the URI or correct the URI and resubmit the request.", 1},
	MsgCouldNotEstablishConnection: {"The service failed to establish a connection with the URI '%1'.", "Critical",
		"Ensure that the URI contains a valid and reachable node name, protocol information and other URI components.", 1},
	MsgResourceAtURIUnauthorized: {"While accessing the resource at '%1', the service received an authorization error '%2'.", "Critical",
		"Ensure that the appropriate access is provided for the service in order for it to access the URI.", 2},
	MsgActionParameterValueFormatError: {"The value '%1' for the parameter %2 in the action %3 is of a different format than the parameter can accept.", "Warning",
		"Correct the value for the parameter in the request body and resubmit the request if the operation failed.", 3},
	MsgPropertyValueFormatError: {"The value '%1' for the property %2 is of a different format than the property can accept.", "Warning",
		"Correct the value for the property in the request body and resubmit the request if the operation failed.", 2},
	MsgInsufficientStorage: {"Insufficient storage or memory available to complete the request.", "Critical",
		"Increase the free storage space or memory and resubmit the request.", 0},
	MsgQueryParameterUnsupported: {"Query parameter '%1' is not supported.", "Warning",
		"Correct or remove the query parameter and resubmit the request.", 1},
	MsgQueryParameterValueTypeError: {"The value '%1' for the query parameter %2 is of a different type than the parameter can accept.", "Warning",
		"Correct the value for the query parameter in the request and resubmit the request if the operation failed.", 2},
	MsgMaximumErrorsExceeded: {"Too many errors have occurred to report them all.", "Critical",
		"Resolve other reported errors and retry the current operation.", 0},
	MsgPropertyDuplicate: {"The property %1 was duplicated in the request.", "Warning",
		"Remove the duplicate property from the request body and resubmit the request if the operation failed.", 1},
	MsgActionParameterDuplicate: {"The action %1 was submitted with more than one value for the parameter %2.", "Warning",
		"Resubmit the action with only one instance of the action parameter in the request body if the operation failed.", 2},
	MsgNoOperation: {"The request body submitted contain no data to act upon and no changes to the resource took place.", "Warning",
		"Add properties in the JSON object and resubmit the request.", 0},
	MsgStringValueTooLong: {"The string '%1' exceeds the length limit %2.", "Warning",
		"Resubmit the request with an appropriate string length.", 2},
	MsgAccessDenied: {"While attempting to establish a connection to '%1', the service denied access.", "Critical",
		"Attempt to ensure that the URI is correct and that the service has the appropriate credentials.", 1},
	MsgCreateLimitReachedForResource: {"The create operation failed because the resource has reached the limit of possible resources.", "Critical",
		"Either delete resources and resubmit the request if the operation failed or do not resubmit the request.", 0},
	MsgActionParameterNotSupported: {"The parameter %1 for the action %2 is not supported on the target resource.", "Warning",
		"Remove the parameter supplied and resubmit the request if the operation failed.", 2},
	MsgOperationFailed: {"An error occurred internal to the service as part of the overall request.  Partial results may have been returned.", "Warning",
		"Resubmit the request.  If the problem persists, consider resetting the service or provider.", 0},
}

// The Update message registry (DMTF Update.1.0.2): what a firmware
// update's task says. Its IDs differ from the Base registry's.
const (
	updateRegistryPrefix  = "Update"
	updateRegistryVersion = "1.0.2"
	updateRegistryID      = updateRegistryPrefix + "." + updateRegistryVersion
)

// Update registry messages used by this service.
const (
	MsgTransferringToComponent MessageID = "TransferringToComponent"
	MsgAwaitToActivate         MessageID = "AwaitToActivate"
	MsgUpdateSuccessful        MessageID = "UpdateSuccessful"
	MsgTransferFailed          MessageID = "TransferFailed"
	MsgVerificationFailed      MessageID = "VerificationFailed"
	MsgApplyFailed             MessageID = "ApplyFailed"
)

var updateMessages = map[MessageID]message{
	MsgTransferringToComponent: {"Image '%1' is being transferred to '%2'.", "OK", "None.", 2},
	MsgAwaitToActivate: {"Awaiting for an action to proceed with activating image '%1' on '%2'.", "OK",
		"Perform the requested action to advance the update operation.", 2},
	MsgUpdateSuccessful:   {"Device '%1' successfully updated with image '%2'.", "OK", "None.", 2},
	MsgTransferFailed:     {"Transfer of image '%1' to '%2' failed.", "Critical", "None.", 2},
	MsgVerificationFailed: {"Verification of image '%1' at '%2' failed.", "Critical", "None.", 2},
	MsgApplyFailed:        {"Installation of image '%1' to '%2' failed.", "Critical", "None.", 2},
}

// messageObject is one entry of @Message.ExtendedInfo (Message.v1_1_2).
type messageObject struct {
	ODataType       string   `json:"@odata.type"`
	MessageID       string   `json:"MessageId"`
	Message         string   `json:"Message"`
	MessageArgs     []string `json:"MessageArgs"`
	Severity        string   `json:"Severity"`
	MessageSeverity string   `json:"MessageSeverity"`
	Resolution      string   `json:"Resolution"`
}

// Bounds of an error response, whoever sends what: at most maxMessages
// messages (then one MaximumErrorsExceeded saying how many more), each
// argument at most maxArg bytes (a value the client sent: maxArgText), the
// top-level detail and a Resolution at most maxDetail.
const (
	maxMessages = 8
	maxArg      = 256
	maxArgText  = 64
	maxDetail   = 512
)

// msgList collects the messages of one response, keeping maxMessages and
// counting the rest.
type msgList struct {
	msgs []messageObject
	more int
}

func (l *msgList) add(id MessageID, args ...string) {
	if len(l.msgs) == maxMessages {
		l.more++
		return
	}
	l.msgs = append(l.msgs, newMessage(id, args...))
}

// list is the messages, the last saying how many were left out.
func (l *msgList) list() []messageObject {
	if l.more == 0 {
		return l.msgs
	}
	m := newMessage(MsgMaximumErrorsExceeded)
	m.Resolution = fmt.Sprintf("%d more errors were found and not reported. %s", l.more, m.Resolution)
	return append(l.msgs, m)
}

// newMessage fills a registry message with its arguments, each cut to
// maxArg bytes.
func newMessage(id MessageID, args ...string) messageObject {
	registry := baseRegistryID
	m, ok := baseMessages[id]
	if !ok {
		registry = updateRegistryID
		if m, ok = updateMessages[id]; !ok {
			panic(fmt.Sprintf("redfish: message %q is not in the registry table", id))
		}
	}
	for i, a := range args {
		if len(a) > maxArg {
			args = slices.Clone(args)
			args[i] = truncate(a, maxArg)
		}
	}
	text := m.Text
	for i := len(args); i > 0; i-- { // %10 before %1
		text = strings.ReplaceAll(text, fmt.Sprintf("%%%d", i), args[i-1])
	}
	if args == nil {
		args = []string{}
	}
	return messageObject{
		ODataType:       "#Message.v1_1_2.Message",
		MessageID:       registry + "." + string(id),
		Message:         text,
		MessageArgs:     args,
		Severity:        m.Severity,
		MessageSeverity: m.Severity,
		Resolution:      m.Resolution,
	}
}

// apiError is a Redfish error response: an HTTP status and the messages of
// its @Message.ExtendedInfo.
type apiError struct {
	status   int
	messages []messageObject
	detail   string      // extra human-readable text for the top-level message
	header   [][2]string // headers to add (Allow, WWW-Authenticate, Retry-After)
}

func (e *apiError) Error() string {
	if len(e.messages) == 0 {
		return fmt.Sprintf("HTTP %d", e.status)
	}
	return fmt.Sprintf("HTTP %d %s: %s", e.status, e.messages[0].MessageID, e.messages[0].Message)
}

func newError(status int, id MessageID, args ...string) *apiError {
	return &apiError{status: status, messages: []messageObject{newMessage(id, args...)}}
}

func (e *apiError) with(detail string) *apiError { e.detail = truncate(detail, maxDetail); return e }

func (e *apiError) withHeader(k, v string) *apiError {
	e.header = append(e.header, [2]string{k, v})
	return e
}

// errorBody is the JSON of a Redfish error response (Redfish spec "Error
// responses"): one general code and the specific messages.
func errorBody(e *apiError) map[string]any {
	if len(e.messages) > maxMessages+1 {
		l := msgList{msgs: e.messages[:maxMessages:maxMessages], more: len(e.messages) - maxMessages}
		e.messages = l.list()
	}
	for i := range e.messages {
		if len(e.messages[i].Resolution) > maxDetail {
			e.messages[i].Resolution = truncate(e.messages[i].Resolution, maxDetail)
		}
	}
	code := baseRegistryID + "." + string(MsgGeneralError)
	msg := "A general error has occurred. See ExtendedInfo for more information."
	if len(e.messages) == 1 {
		code = e.messages[0].MessageID
		msg = e.messages[0].Message
	}
	if e.detail != "" {
		msg += " " + e.detail
	}
	return map[string]any{"error": map[string]any{
		"code":                  code,
		"message":               msg,
		"@Message.ExtendedInfo": e.messages,
	}}
}

// registryBody renders the Base message registry as a MessageRegistry
// resource, listing the messages this service uses.
func registryBody() map[string]any {
	return messageRegistry(baseRegistryPrefix, baseRegistryVersion, registryURI, "Base Message Registry",
		"The base messages for Redfish (the subset this service emits)", baseMessages)
}

// updateRegistryBody renders the Update message registry likewise.
func updateRegistryBody() map[string]any {
	return messageRegistry(updateRegistryPrefix, updateRegistryVersion, updateRegistryURI, "Update Message Registry",
		"The update status and error messages (the subset this service emits)", updateMessages)
}

func messageRegistry(prefix, version, uri, name, description string, table map[MessageID]message) map[string]any {
	msgs := map[string]any{}
	for id, m := range table {
		entry := map[string]any{
			"Description":     m.Text,
			"Message":         m.Text,
			"Severity":        m.Severity,
			"MessageSeverity": m.Severity,
			"NumberOfArgs":    m.NumArgs,
			"Resolution":      m.Resolution,
		}
		if m.NumArgs > 0 {
			types := make([]string, m.NumArgs)
			for i := range types {
				types[i] = "string"
			}
			entry["ParamTypes"] = types
		}
		msgs[string(id)] = entry
	}
	return map[string]any{
		"@odata.type":     "#MessageRegistry.v1_5_0.MessageRegistry",
		"@odata.id":       uri,
		"Id":              prefix + "." + version,
		"Name":            name,
		"Language":        "en",
		"Description":     description,
		"RegistryPrefix":  prefix,
		"RegistryVersion": version,
		"OwningEntity":    "DMTF",
		"Messages":        msgs,
	}
}

// MessageRegistries returns the message registries the service serves
// (Base and Update), by registry Id ("Base.1.19.0"), as JSON: what a client
// that keeps standard registries of its own may be given (python3-sushy
// 4.3.3 as Debian ships it lacks its sushy/standard_registries/, which
// internal/ironictest fills from here).
func MessageRegistries() map[string][]byte {
	out := map[string][]byte{}
	for _, body := range []map[string]any{registryBody(), updateRegistryBody()} {
		b, err := json.MarshalIndent(body, "", "  ")
		if err != nil {
			panic("redfish: a message registry does not encode: " + err.Error())
		}
		out[body["Id"].(string)] = b
	}
	return out
}
