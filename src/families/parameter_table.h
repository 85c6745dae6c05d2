// ParameterTable: a family's parameters declared once, as a typed struct and a table of its fields, from which the
// parameter list (names, candidate values, descriptions), the Config <-> struct conversion (tuning database JSON
// keys, --config text), the kernel's -D defines and named constraints over typed fields are all derived.
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "convtune/error.h"
#include "convtune/extension/kernel_family.h"

namespace convtune {

template <typename Params>
class ParameterTable {
 public:
  using Member = int64_t Params::*;
  struct Field {
    std::string name;  // the parameter's name everywhere: Config key, -D define, database JSON key
    Member member;
    std::vector<int64_t> values;  // candidates, in the order a search should try them
    std::string description;
  };
  // holds(params, context): only the fields listed in the constraint's `uses` are set in `params`.
  using Predicate = std::function<bool(const Params&, const ConstraintContext&)>;

  explicit ParameterTable(std::vector<Field> fields) : fields_(std::move(fields)) {}

  std::vector<Parameter> parameters() const {
    std::vector<Parameter> list;
    for (const Field& f : fields_) list.push_back({f.name, f.values, f.description});
    return list;
  }

  // Throws InvalidArgument naming the first parameter the configuration lacks.
  Params read(const Config& config) const {
    Params p{};
    for (const Field& f : fields_) {
      const auto it = config.find(f.name);
      if (it == config.end())
        throw InvalidArgument(fmt::format("configuration {} lacks parameter {}", to_string(config), f.name));
      p.*f.member = it->second;
    }
    return p;
  }

  Config write(const Params& p) const {
    Config config;
    for (const Field& f : fields_) config[f.name] = p.*f.member;
    return config;
  }

  // Every parameter as a -D define, added to `defines` (beside the problem's shape).
  void add_defines(const Params& p, std::map<std::string, std::string>& defines) const {
    for (const Field& f : fields_) defines[f.name] = std::to_string(p.*f.member);
  }

  const std::string& name(Member member) const {
    for (const Field& f : fields_)
      if (f.member == member) return f.name;
    throw Error("ParameterTable: a constraint reads a field the table does not declare");
  }

  // A named constraint over typed fields: SearchSpace checks it as soon as the fields in `uses` are assigned, so
  // the predicate sees exactly those (the others stay zero).
  Constraint constraint(std::string name, std::vector<Member> uses, Predicate holds) const {
    std::vector<std::string> names;
    for (Member m : uses) names.push_back(this->name(m));
    return {std::move(name), names, [uses, names, holds = std::move(holds)](const ConstraintContext& context) {
              Params p{};
              for (size_t i = 0; i < uses.size(); ++i) p.*uses[i] = context.config.at(names[i]);
              return holds(p, context);
            }};
  }

  const std::vector<Field>& fields() const { return fields_; }

 private:
  std::vector<Field> fields_;
};

// A table of P's fields in groups, in order: each group appends its fields to the list (a family's own, shared
// parameter groups, or appended_fields of a shared table).
template <typename P, typename... Groups>
ParameterTable<P> grouped_table(Groups&&... groups) {
  std::vector<typename ParameterTable<P>::Field> fields;
  (groups(fields), ...);
  return ParameterTable<P>(std::move(fields));
}

// A group of fields taken from a table declared over a base of P (tile fields several families share): their
// constraints and defines, stated over that table, hold for P's, which names the same fields.
template <typename P, typename Base>
auto appended_fields(const ParameterTable<Base>& base) {
  return [&base](std::vector<typename ParameterTable<P>::Field>& fields) {
    for (const auto& f : base.fields()) fields.push_back({f.name, f.member, f.values, f.description});
  };
}

}  // namespace convtune
