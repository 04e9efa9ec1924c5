import "./ui.css";

type WeatherProps = { city: string; temperature: number; condition: string };

// The components a graph's `push_ui_message(name, props)` renders, by name.
const WeatherComponent = (props: WeatherProps) => {
  return (
    <div className="weather-card" data-testid="weather" data-city={props.city}>
      <h3>Weather in {props.city}</h3>
      <p>
        {props.temperature} °C, {props.condition}
      </p>
    </div>
  );
};

export default { weather: WeatherComponent };
